package netdev

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
)

// A socket goes back to the pool after a request the kernel answered, and is closed after any
// other failure, which may leave an answer in it.
func TestReleaseKeepsAnsweredSockets(t *testing.T) {
	tests := []struct {
		name string
		err  error
		kept bool
	}{
		{"no error", nil, true},
		{"an errno from the kernel", fmt.Errorf("deleting: %w", syscall.EEXIST), true},
		{"no such device", netlink.LinkNotFoundError{}, true},
		{"dump interrupted", netlink.ErrDumpInterrupted, true},
		{"a failure of the socket", errors.New("receive timed out"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for len(idle) > 0 {
				(<-idle).Close()
			}
			h, ns, err := handle()
			if err != nil || ns != homeNs {
				t.Fatalf("handle in the process's namespace: kept in %d, %v", ns, err)
			}
			release(h, ns, tt.err)
			if got := len(idle) == 1; got != tt.kept {
				t.Fatalf("kept %v, want %v", got, tt.kept)
			}
			if tt.kept && <-idle != h {
				t.Fatal("the pool holds another socket")
			}
			h.Close()
		})
	}
}

// The pool keeps at most maxIdleHandles sockets; more are closed.
func TestPoolIsBounded(t *testing.T) {
	var hs []*netlink.Handle
	for range maxIdleHandles + 3 {
		h, err := netlink.NewHandle()
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		release(h, homeNs, nil)
	}
	if len(idle) != maxIdleHandles {
		t.Fatalf("%d idle sockets, want %d", len(idle), maxIdleHandles)
	}
	for len(idle) > 0 {
		(<-idle).Close()
	}
}

// Dump lists again while the kernel interrupts the dump, and gives up after 50 more tries.
func TestDumpRetriesInterrupted(t *testing.T) {
	other := errors.New("no permission")
	tests := []struct {
		name        string
		interrupted int   // dumps interrupted before one ends
		then        error // what the dump after them returns
		wantCalls   int
		wantErr     error
	}{
		{"first dump whole", 0, nil, 1, nil},
		{"interrupted twice", 2, nil, 3, nil},
		{"interrupted, then another failure", 1, other, 2, other},
		{"interrupted every time", 1000, nil, 51, netlink.ErrDumpInterrupted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			got, err := Dump(func() (int, error) {
				calls++
				if calls <= tt.interrupted {
					return -calls, netlink.ErrDumpInterrupted
				}
				return calls, tt.then
			})
			if calls != tt.wantCalls || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("%d calls, %v; want %d calls, %v", calls, err, tt.wantCalls, tt.wantErr)
			}
			if err == nil && got != calls {
				t.Fatalf("returned the list of dump %d, want the last (%d)", got, calls)
			}
		})
	}
}
