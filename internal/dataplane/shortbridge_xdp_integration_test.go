//go:build integration

package dataplane

import (
	"errors"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// TestShortbridgeXDP puts the XDP prototype on both ports of a link (and the passing program on
// the nodes' interfaces) and checks that IPv4 (with ARP) and non-IP frames cross both ways as
// XDP frames: with the ports' tc filters removed, nothing else could carry them.
func TestShortbridgeXDP(t *testing.T) {
	testkit.RequireRoot(t)
	l := setupTestLink(t)
	if err := AttachShortbridgeXDP(0, l.b.port); !errors.Is(err, ErrXDPAttach) {
		t.Fatalf("AttachShortbridgeXDP on port index 0 = %v; want ErrXDPAttach", err)
	}
	for _, p := range [][2]*testNode{{l.a, l.b}, {l.b, l.a}} {
		if err := inNS(p[0].ns, func() error { return AttachXDPPass(nodeIfName) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range [][2]*testNode{{l.a, l.b}, {l.b, l.a}} {
		if err := AttachShortbridgeXDP(p[0].port, p[1].port); err != nil {
			t.Fatal(err)
		}
	}
	flushNeighbours(t, l.a)
	flushNeighbours(t, l.b)
	for _, c := range []struct {
		name     string
		from, to *testNode
	}{{"A->B", l.a, l.b}, {"B->A", l.b, l.a}} {
		if err := icmpEcho(c.from, c.to.addr, 2*time.Second); err != nil {
			t.Fatalf("ping %s over XDP: %v", c.name, err)
		}
		if !hasNeighbour(t, c.from, c.to.addr, c.to.mac) {
			t.Fatalf("%s: no ARP entry for %v (%v)", c.name, c.to.addr, c.to.mac)
		}
		if err := sendRawFrame(c.from, c.to); err != nil {
			t.Fatalf("non-IP frame %s over XDP: %v", c.name, err)
		}
	}
}
