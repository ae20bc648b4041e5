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
			h, kept, err := handle()
			if err != nil || !kept {
				t.Fatalf("handle in the process's namespace: kept %v, %v", kept, err)
			}
			release(h, tt.err)
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
		release(h, nil)
	}
	if len(idle) != maxIdleHandles {
		t.Fatalf("%d idle sockets, want %d", len(idle), maxIdleHandles)
	}
	for len(idle) > 0 {
		(<-idle).Close()
	}
}
