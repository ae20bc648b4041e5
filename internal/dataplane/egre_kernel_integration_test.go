//go:build integration

package dataplane

import (
	"net"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// TestDecapL3Probe checks that the kernel is asked the right question: adjust_room takes the
// DECAP_L3 flags from Linux 6.3 on (Debian's 6.1 refuses them; a distribution kernel of an
// earlier series with them backported would make this test say so).
func TestDecapL3Probe(t *testing.T) {
	testkit.RequireRoot(t)
	rel := KernelRelease()
	m := regexp.MustCompile(`^(\d+)\.(\d+)`).FindStringSubmatch(rel)
	if m == nil {
		t.Fatalf("kernel release %q: no version", rel)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	want := major > 6 || major == 6 && minor >= 3
	if got := haveDecapL3(); got != want {
		t.Errorf("Linux %s: adjust_room takes BPF_F_ADJ_ROOM_DECAP_L3_*: probe says %v, want %v", rel, got, want)
	}
}

// TestEGREBeforeDecapL3 runs the tunnel as it runs on kernels before 6.3 (Debian 12's 6.1),
// whose adjust_room refuses the DECAP_L3 flags (there every IP frame was dropped at
// decapsulation, counted as an error, before the program asked the kernel): IPv4 and IPv6
// frames straight into the node, ARP, and TCP with segmentation offload over both (GSO packets
// cross the veth underlay whole, and the node's stack needs their protocol right), nothing
// counted as an error. On such a kernel itself TestEGRE checks the same (docs/guest-kernel.md).
func TestEGREBeforeDecapL3(t *testing.T) {
	testkit.RequireRoot(t)
	saved := decapL3
	decapL3 = func() bool { return false }
	t.Cleanup(func() { decapL3 = saved })
	m1, m2 := setupEGRE(t)
	for _, m := range []*egreMachine{m1, m2} {
		inMachine(t, m, func() error {
			if err := AttachEncap(Config{}, m.port, m.underlay, Tunnel{Key: egreKey, Local: m.addr, Remote: m.peer.addr}); err != nil {
				return err
			}
			d, err := OpenDecap(m.underlay, m.addr, true)
			if err != nil {
				return err
			}
			m.decap = d
			t.Cleanup(func() { d.Close() })
			// Into the node, as the egre kind registers a direct connector's tunnel.
			if err := d.Add(egreKey, m.peer.addr, m.port, true); err != nil {
				return err
			}
			return PrimeNeighbour(m.underlay, m.peer.addr)
		})
	}
	for _, m := range []*egreMachine{m1, m2} {
		waitNeighbour(t, m.nl, m.underlay, net.IP(m.peer.addr.AsSlice()), m.peer.ulMAC)
	}
	for _, p := range [][2]*egreMachine{{m1, m2}, {m2, m1}} {
		for _, dst := range []net.IP{p[1].node.addr4, p[1].node.addr6} {
			if err := egrePing(p[0].node.ns, dst, 3*time.Second); err != nil {
				t.Errorf("ping %s -> %s (%v): %v", p[0].name, p[1].name, dst, err)
			}
		}
		if !nodeHasNeighbour(t, p[0].node, p[1].node.addr4, p[1].node.mac) {
			t.Errorf("node of %s has no ARP entry %v -> %v", p[0].name, p[1].node.addr4, p[1].node.mac)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	egreTCP(t, m1.node, m2.node, m2.node.addr4, 4<<20)
	egreTCP(t, m2.node, m1.node, m1.node.addr6, 4<<20)
	for _, m := range []*egreMachine{m1, m2} {
		c, err := m.decap.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if c.Decapsulated == 0 || c.Errors != 0 {
			t.Errorf("%s: decap counters %+v: want frames decapsulated and no error", m.name, c)
		}
	}
}
