package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
)

// TestLater checks which failed applies the agent tries again instead of reporting them failed
// for good: a dump the kernel interrupted every time while the machine's other networks
// changed (as in a failover, where a failed report left the network unconverged) is one.
func TestLater(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"network locked", fmt.Errorf("network x %w", state.ErrBusy), true},
		{"dump interrupted, rolled back", fmt.Errorf("%w; the network was taken back to what it was", netlink.ErrDumpInterrupted), true},
		{"dump interrupted among others", errors.Join(errors.New("link l1: no such device"), fmt.Errorf("sweep: %w", netlink.ErrDumpInterrupted)), true},
		{"a real failure", errors.New("node r: exec failed"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := later(c.err); got != c.want {
				t.Errorf("later(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

// TestLimit runs 12 applies through an agent of Parallel 3: never more than 3 at once, all of
// them run, and one that waits for a slot when its context ends returns without running.
func TestLimit(t *testing.T) {
	a := newAgent(Config{Parallel: 3, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var running, most atomic.Int32
	var ran atomic.Int32
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			a.limit(context.Background(), func() error {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(20 * time.Millisecond)
				running.Add(-1)
				ran.Add(1)
				return nil
			})
		})
	}
	wg.Wait()
	if most.Load() != 3 || ran.Load() != 12 {
		t.Errorf("%d applies ran, at most %d at once; want 12, 3", ran.Load(), most.Load())
	}
	for range 3 {
		a.slots <- struct{}{} // every slot taken
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.limit(ctx, func() error { t.Error("ran without a slot"); return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a slot past its context: %v", err)
	}
}
