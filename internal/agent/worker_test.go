package agent

import (
	"errors"
	"fmt"
	"testing"

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
