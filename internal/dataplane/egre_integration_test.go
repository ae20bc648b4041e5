//go:build integration

package dataplane

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The test builds two simulated machines, each a network namespace, joined
// by a veth "underlay", and one node on each, joined to its machine by a
// veth whose machine side is a tunnel port:
//
//	node n1 ── eth1 ══ tun0 (egre_encap) ┐ machine m1 ul0 198.18.0.1 (egre_decap)
//	                                     │   ║ underlay veth
//	node n2 ── eth1 ══ tun0 (egre_encap) ┘ machine m2 ul0 198.18.0.2 (egre_decap)
//
// and checks that the nodes' interfaces behave as one Ethernet link (ARP,
// IPv4, IPv6, non-IP and VLAN-tagged frames, bulk TCP with segmentation
// offload), that the frames on the underlay are byte for byte gretap's,
// that foreign GRE packets are dropped and counted, and that the
// machines' own traffic is untouched. The root namespace is never used.

const (
	egreKey     = 0x12345678
	egreNodeMTU = 1458 // 1500 - EGREOverhead
	egreUlName  = "ul0"
	egrePort    = "tun0"
)

type egreNode struct {
	nsName  string
	ns      netns.NsHandle
	nl      *netlink.Handle
	ifindex int // eth1
	mac     net.HardwareAddr
	addr4   net.IP
	addr6   net.IP
}

type egreMachine struct {
	name     string
	nsName   string
	ns       netns.NsHandle
	nl       *netlink.Handle
	addr     netip.Addr
	underlay int // ul0
	ulMAC    net.HardwareAddr
	port     int // tun0
	node     *egreNode
	decap    *Decap
	peer     *egreMachine
}

func TestEGRE(t *testing.T) {
	testkit.RequireRoot(t)
	// Registered first, so checked last: after the namespaces (and with
	// them the devices) are gone, no program of ours may be left.
	var progIDs []ebpf.ProgramID
	t.Cleanup(func() {
		if alive := progsGone(progIDs); len(alive) > 0 {
			t.Errorf("EGRE programs %v outlived their devices", alive)
		}
	})
	m1, m2 := setupEGRE(t)

	// A port that had a shortbridge gets the encap in its place.
	inMachine(t, m1, func() error { return AttachShortbridge(cfg, m1.port, m1.underlay, false) })
	// Attach both machines' encaps many times at once.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 8 {
		for _, m := range []*egreMachine{m1, m2} {
			wg.Go(func() {
				errs <- inNS(m.ns, func() error {
					return AttachEncap(cfg, m.port, m.underlay, Tunnel{Key: egreKey, Local: m.addr, Remote: m.peer.addr})
				})
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*egreMachine{m1, m2} {
		fs := egreFilters(t, m, netlink.HANDLE_MIN_INGRESS, m.port)
		if len(fs) != 1 || fs[0].Name != egreEncapFilterName {
			t.Fatalf("%s: %s ingress filters = %v, want exactly one %q", m.name, egrePort, filterNames(fs), egreEncapFilterName)
		}
		progIDs = append(progIDs, ebpf.ProgramID(fs[0].Id))
	}

	// Decap: none yet, then created once, then found again.
	inMachine(t, m1, func() error {
		if _, err := OpenDecap(m1.underlay, m1.addr, false); !errors.Is(err, ErrNoDecap) {
			return fmt.Errorf("OpenDecap(create=false) without a program: err = %v, want ErrNoDecap", err)
		}
		return nil
	})
	for _, m := range []*egreMachine{m1, m2} {
		inMachine(t, m, func() error {
			d, err := OpenDecap(m.underlay, m.addr, true)
			if err != nil {
				return err
			}
			m.decap = d
			t.Cleanup(func() { d.Close() })
			return d.Add(egreKey, m.peer.addr, m.port, false)
		})
		fs := egreFilters(t, m, netlink.HANDLE_MIN_INGRESS, m.underlay)
		if len(fs) != 1 || fs[0].Name != egreDecapFilterName {
			t.Fatalf("%s: %s ingress filters = %v, want exactly one %q", m.name, egreUlName, filterNames(fs), egreDecapFilterName)
		}
		progIDs = append(progIDs, ebpf.ProgramID(fs[0].Id))
	}
	t.Run("decap maps", func(t *testing.T) { testEGREDecapMaps(t, m1) })
	t.Run("VXLAN peers", func(t *testing.T) { testVXLANPeers(t, m1) })

	t.Run("no neighbour", func(t *testing.T) { testEGRENoNeighbour(t, m1) })

	for _, m := range []*egreMachine{m1, m2} {
		inMachine(t, m, func() error { return PrimeNeighbour(m.underlay, m.peer.addr) })
	}
	for _, m := range []*egreMachine{m1, m2} {
		waitNeighbour(t, m.nl, m.underlay, net.IP(m.peer.addr.AsSlice()), m.peer.ulMAC)
	}

	// Everything that crosses from here on is captured on m2's underlay.
	capture := startCapture(t, m2)

	t.Run("ipv4", func(t *testing.T) {
		flushNodeNeighbours(t, m1.node)
		flushNodeNeighbours(t, m2.node)
		for _, p := range [][2]*egreMachine{{m1, m2}, {m2, m1}} {
			if err := egrePing(p[0].node.ns, p[1].node.addr4, 3*time.Second); err != nil {
				t.Fatalf("ping %s -> %s: %v", p[0].name, p[1].name, err)
			}
		}
		// ARP went through the tunnel and found the other node's MAC.
		for _, p := range [][2]*egreMachine{{m1, m2}, {m2, m1}} {
			if !nodeHasNeighbour(t, p[0].node, p[1].node.addr4, p[1].node.mac) {
				t.Fatalf("node of %s has no ARP entry %v -> %v", p[0].name, p[1].node.addr4, p[1].node.mac)
			}
		}
		// An IP frame while m1 does not know m2's MAC address: it waits
		// for the kernel to resolve it (bpf_redirect_neigh). One echo
		// request only (no resend within 400ms).
		// The template of the MAC addresses lasts EncapRouteTTL: after
		// that the program looks the route up again.
		peerIP := net.IP(m2.addr.AsSlice())
		if err := m1.nl.NeighDel(&netlink.Neigh{LinkIndex: m1.underlay, Family: netlink.FAMILY_V4, IP: peerIP}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(EncapRouteTTL + 100*time.Millisecond)
		if err := egrePing(m1.node.ns, m2.node.addr4, 400*time.Millisecond); err != nil {
			t.Fatalf("ping while m1 has no neighbour entry for m2: %v", err)
		}
		waitNeighbour(t, m1.nl, m1.underlay, peerIP, m2.ulMAC)
	})
	t.Run("neighbour change", func(t *testing.T) { testEGRENeighbourChange(t, m1) })
	t.Run("ipv6", func(t *testing.T) {
		for _, p := range [][2]*egreMachine{{m1, m2}, {m2, m1}} {
			if err := egrePing(p[0].node.ns, p[1].node.addr6, 3*time.Second); err != nil {
				t.Fatalf("ping6 %s -> %s: %v", p[0].name, p[1].name, err)
			}
		}
	})
	t.Run("non-IP", func(t *testing.T) {
		for _, p := range [][2]*egreMachine{{m1, m2}, {m2, m1}} {
			if err := egreRawFrame(p[0].node, p[1].node, nil); err != nil {
				t.Fatalf("ethertype %#x %s -> %s: %v", testEtherType, p[0].name, p[1].name, err)
			}
		}
	})
	t.Run("vlan", func(t *testing.T) {
		for _, tags := range [][]vlanTag{
			{{unix.ETH_P_8021Q, 0x2064}},
			{{unix.ETH_P_8021AD, 0x0123}, {unix.ETH_P_8021Q, 0xa456}},
		} {
			if err := egreRawFrame(m1.node, m2.node, tags); err != nil {
				t.Fatalf("tags %x: %v", tags, err)
			}
		}
		// An IPv4 ethertype inside a tag: encapsulated with adjust_room
		// (the skb's protocol is IPv4 once the tag is out of band), the
		// tag rebuilt in the inner frame.
		if err := egreRawFrameType(m1.node, m2.node, []vlanTag{{unix.ETH_P_8021Q, 5}}, unix.ETH_P_IP, 4); err != nil {
			t.Fatalf("IPv4 in VLAN 5: %v", err)
		}
	})
	t.Run("wire format", func(t *testing.T) {
		// An ICMP echo (never a GSO packet) captured on m2's underlay.
		if err := egrePing(m1.node.ns, m2.node.addr4, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		f, ok := capture.find(func(f capturedFrame) bool {
			b := f.b
			return len(b) > 42+14+20 && binary.BigEndian.Uint16(b[42+12:]) == unix.ETH_P_IP && b[42+14+9] == unix.IPPROTO_ICMP
		})
		if !ok {
			t.Fatal("no EGRE frame with an ICMP packet captured on m2's underlay")
		}
		checkWireFormat(t, f, m1, m2)
	})
	t.Run("tcp", func(t *testing.T) {
		capture.reset()
		egreTCP(t, m1.node, m2.node, m2.node.addr4, 8<<20)
		egreTCP(t, m2.node, m1.node, m1.node.addr6, 4<<20)
		// With the veth underlay's segmentation offload the GSO super-packets
		// cross the underlay whole: the encapsulation kept them GSO.
		t.Logf("largest EGRE frame on the underlay: %d bytes", capture.maxLen())
		if capture.maxLen() <= 1514 {
			t.Errorf("no EGRE frame larger than 1514 bytes: GSO packets were not encapsulated whole")
		}
	})
	t.Run("tcp software segmentation", func(t *testing.T) {
		// Without GRE segmentation offload on m1's underlay the kernel cuts
		// the super-packets into GRE packets itself (gre_gso_segment),
		// using what adjust_room recorded about the encapsulation.
		testkit.RequireTool(t, "ethtool", "scripts/setup.sh installs ethtool")
		out, err := exec.Command("ip", "netns", "exec", m1.nsName, "ethtool", "-K", egreUlName,
			"tx-gre-segmentation", "off", "tx-gre-csum-segmentation", "off").CombinedOutput()
		if err != nil {
			testkit.Skipf(t, "ethtool -K: %v: %s: the kernel's GRE device needs its offload settings", err, out)
		}
		capture.reset()
		egreTCP(t, m1.node, m2.node, m2.node.addr4, 8<<20)
		t.Logf("largest EGRE frame on the underlay: %d bytes", capture.maxLen())
		if capture.maxLen() > 1514 {
			t.Errorf("EGRE frame of %d bytes on the underlay without GRE segmentation offload", capture.maxLen())
		}
		if f, ok := capture.find(func(f capturedFrame) bool { return f.n == 1514 }); ok {
			checkWireFormat(t, f, m1, m2)
		} else {
			t.Error("no full-size (1514 bytes) EGRE frame captured")
		}
	})
	capture.close()

	t.Run("foreign GRE", func(t *testing.T) { testEGREForeign(t, m1, m2) })

	t.Run("underlay traffic", func(t *testing.T) {
		for _, p := range [][2]*egreMachine{{m1, m2}, {m2, m1}} {
			if err := egrePing(p[0].ns, net.IP(p[1].addr.AsSlice()), 2*time.Second); err != nil {
				t.Fatalf("underlay ping %s -> %s with decap attached: %v", p[0].name, p[1].name, err)
			}
		}
	})

	for _, m := range []*egreMachine{m1, m2} {
		c, err := m.decap.Counters()
		if err != nil {
			t.Fatal(err)
		}
		var ec EncapCounters
		inMachine(t, m, func() (err error) { ec, err = ReadEncapCounters(m.port); return })
		t.Logf("%s: decap %+v, encap %+v", m.name, c, ec)
		if c.Decapsulated == 0 || ec.Encapsulated == 0 || c.Errors != 0 || ec.Errors != 0 {
			t.Errorf("%s: unexpected counters: decap %+v, encap %+v", m.name, c, ec)
		}
	}

	t.Run("delete and detach", func(t *testing.T) { testEGREDetach(t, m1, m2) })
}

// testEGREDecapMaps adds and deletes many tunnels at once through two
// Decaps opened on the same program, and checks the maps stay consistent.
func testEGREDecapMaps(t *testing.T, m *egreMachine) {
	var other *Decap
	inMachine(t, m, func() (err error) {
		other, err = OpenDecap(m.underlay, netip.Addr{}, false)
		return err
	})
	defer other.Close()
	inMachine(t, m, func() error {
		_, err := OpenDecap(m.underlay, netip.MustParseAddr("198.18.0.77"), false)
		if err == nil || !strings.Contains(err.Error(), "is for local address "+m.addr.String()) {
			return fmt.Errorf("OpenDecap with another local address: err = %v, want a mismatch with %v", err, m.addr)
		}
		return nil
	})

	const keys, remotes = 20, 10
	remote := func(j int) netip.Addr { return netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + j)}) }
	run := func(op func(d *Decap, k uint32, r netip.Addr) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, keys*remotes)
		for i := range keys {
			for j := range remotes {
				d := m.decap
				if (i+j)%2 == 1 {
					d = other
				}
				wg.Go(func() { errs <- op(d, uint32(0x1000+i), remote(j)) })
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	run(func(d *Decap, k uint32, r netip.Addr) error { return d.Add(k, r, m.port, false) })
	// Again: the same target is not an error; another one is.
	run(func(d *Decap, k uint32, r netip.Addr) error { return d.Add(k, r, m.port, false) })
	if err := m.decap.Add(0x1000, remote(0), m.underlay, false); !errors.Is(err, ErrTunnelExists) {
		t.Fatalf("Add with another target: err = %v, want ErrTunnelExists", err)
	}
	if n, err := other.Len(); err != nil || n != keys*remotes+1 {
		t.Fatalf("Len = %d, %v; want %d", n, err, keys*remotes+1)
	}
	counts := keyCounts(t, m.decap)
	for i := range keys {
		if c := counts[uint32(0x1000+i)]; c != remotes {
			t.Fatalf("keys[%#x] = %d, want %d", 0x1000+i, c, remotes)
		}
	}
	run(func(d *Decap, k uint32, r netip.Addr) error { return d.Delete(k, r) })
	if err := m.decap.Delete(0x1000, remote(0)); !errors.Is(err, ErrNoTunnel) {
		t.Fatalf("Delete of a missing tunnel: err = %v, want ErrNoTunnel", err)
	}
	if n, err := m.decap.Len(); err != nil || n != 1 {
		t.Fatalf("Len after deletes = %d, %v; want 1", n, err)
	}
	if counts := keyCounts(t, m.decap); len(counts) != 1 || counts[egreKey] != 1 {
		t.Fatalf("keys map after deletes = %v, want only %#x: 1", counts, egreKey)
	}
}

// testVXLANPeers adds VXLAN peers of both ports, checks that Len counts them with the EGRE
// tunnels and that bad ports and VNIs are refused, and deletes them again.
func testVXLANPeers(t *testing.T, m *egreMachine) {
	r1, r2 := netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2")
	for _, tc := range []struct {
		name string
		port uint16
		vni  uint32
		err  string
	}{
		{"VNI 0", VXLANPort, 0, "invalid VNI 0"},
		{"VNI over 24 bits", VXLANPort, 1 << 24, "invalid VNI"},
		{"another port", 8472, 7, "not a VXLAN port of trellis"},
	} {
		if err := m.decap.AddVXLAN(tc.port, tc.vni, r1); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("AddVXLAN with %s: %v, want an error with %q", tc.name, err, tc.err)
		}
	}
	before, err := m.decap.Len()
	if err != nil {
		t.Fatal(err)
	}
	peers := []struct {
		port uint16
		vni  uint32
		r    netip.Addr
	}{{VXLANPort, 7, r1}, {VXLANPort, 7, r2}, {EngineVXLANPort, 7, r1}, {VXLANPort, 7, r1}} // the last again
	for _, p := range peers {
		if err := m.decap.AddVXLAN(p.port, p.vni, p.r); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := m.decap.Len(); err != nil || n != before+3 {
		t.Fatalf("Len = %d, %v; want %d", n, err, before+3)
	}
	for _, p := range append(peers, peers[0]) { // deleting what is gone is not an error
		if err := m.decap.DeleteVXLAN(p.port, p.vni, p.r); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := m.decap.Len(); err != nil || n != before {
		t.Fatalf("Len after deletes = %d, %v; want %d", n, err, before)
	}
}

// keyCounts returns the keys map, with keys in host byte order.
func keyCounts(t *testing.T, d *Decap) map[uint32]uint32 {
	t.Helper()
	m := map[uint32]uint32{}
	var k, v uint32
	it := d.keys.Iterate()
	for it.Next(&k, &v) {
		m[be32(k)] = v
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// testEGRENoNeighbour checks that a non-IP frame is dropped and counted
// while m1 does not know m2's MAC address (IP frames would resolve it).
func testEGRENoNeighbour(t *testing.T, m *egreMachine) {
	peerIP := net.IP(m.peer.addr.AsSlice())
	for attempt := range 5 {
		if err := m.nl.NeighDel(&netlink.Neigh{LinkIndex: m.underlay, Family: netlink.FAMILY_V4, IP: peerIP}); err != nil && !errors.Is(err, unix.ENOENT) {
			t.Fatal(err)
		}
		// A frame of an earlier attempt may have left a template with
		// the old MAC address: it lasts EncapRouteTTL.
		time.Sleep(EncapRouteTTL + 100*time.Millisecond)
		before := encapCounters(t, m)
		// One try: the window in which the neighbour is missing is short.
		err := egreRawFrameType(m.node, m.peer.node, nil, testEtherType, 1)
		after := encapCounters(t, m)
		if err == nil {
			// Some IPv6 frame of the node (router solicitation, MLD)
			// resolved the neighbour in between: try again.
			t.Logf("attempt %d: frame crossed (neighbour resolved meanwhile)", attempt)
			continue
		}
		if after.NoRoute <= before.NoRoute {
			t.Fatalf("non-IP frame lost but NoRoute did not grow: before %+v, after %+v", before, after)
		}
		return
	}
	t.Fatal("could not observe a frame dropped for lack of a neighbour")
}

func encapCounters(t *testing.T, m *egreMachine) EncapCounters {
	t.Helper()
	var c EncapCounters
	inMachine(t, m, func() (err error) { c, err = ReadEncapCounters(m.port); return })
	return c
}

// testEGREForeign sends hand-made GRE packets from m1's underlay to m2.
func testEGREForeign(t *testing.T, m1, m2 *egreMachine) {
	rx := openRawRx(t, m2.node)
	defer unix.Close(rx)
	tx, err := socketIn(m1.ns, unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)

	send := func(src netip.Addr, key uint32, greFlags uint16, innerLen, outerPad int) []byte {
		t.Helper()
		tag := nonce()
		inner := make([]byte, innerLen)
		copy(inner[0:6], m2.node.mac)
		copy(inner[6:12], []byte{0x02, 0xee, 0, 0, 0, 1})
		binary.BigEndian.PutUint16(inner[12:], testEtherType)
		copy(inner[14:], tag)
		f := egreFrame(m2.ulMAC, m1.ulMAC, src, m2.addr, key, greFlags, inner)
		f = append(f, make([]byte, outerPad)...)
		to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: m1.underlay, Halen: 6}
		copy(to.Addr[:], m2.ulMAC)
		// ENOBUFS: m2's backlog was full (other tests' load) and the
		// packet never reached the program; send it again.
		for try := 0; ; try++ {
			err := unix.Sendto(tx, f, 0, to)
			if err == nil {
				return tag
			}
			if !errors.Is(err, unix.ENOBUFS) || try == 20 {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	check := func(name string, want EGRECounters, delivered bool, tag []byte, wantLen int) {
		t.Helper()
		got, n := recvTagged(rx, tag, 500*time.Millisecond)
		if got != delivered {
			t.Errorf("%s: delivered to m2's node = %v, want %v", name, got, delivered)
		}
		if got && wantLen > 0 && n != wantLen {
			t.Errorf("%s: inner frame of %d bytes delivered, want %d", name, n, wantLen)
		}
		c, err := m2.decap.Counters()
		if err != nil {
			t.Fatal(err)
		}
		// The nodes' own background traffic (IPv6 multicast listener
		// reports, router solicitations) may be decapsulated meanwhile:
		// Decapsulated may only be higher than counted here.
		if c.UnknownKey != want.UnknownKey || c.WrongSource != want.WrongSource || c.Errors != want.Errors || c.Decapsulated < want.Decapsulated {
			t.Errorf("%s: counters %+v, want %+v", name, c, want)
		}
		want.Decapsulated = c.Decapsulated
	}
	base, err := m2.decap.Counters()
	if err != nil {
		t.Fatal(err)
	}
	want := base

	tag := send(m1.addr, 0xdeadbeef, 0x2000, 60, 0)
	want.UnknownKey++
	check("wrong key", want, false, tag, 0)

	tag = send(netip.MustParseAddr("198.18.0.99"), egreKey, 0x2000, 60, 0)
	want.WrongSource++
	check("wrong source", want, false, tag, 0)

	// GRE with a checksum is not EGRE's: it goes to the IP stack.
	tag = send(m1.addr, egreKey, 0xa000, 60, 0)
	check("GRE with checksum", want, false, tag, 0)

	// The same hand-made packet with the right key and source is
	// delivered: the drops above were for the reason tested.
	tag = send(m1.addr, egreKey, 0x2000, 60, 0)
	want.Decapsulated++
	check("right key and source", want, true, tag, 60)

	// Ethernet padding after the outer IP packet is not part of the inner
	// frame; an inner frame too short for adjust_room is padded to 60.
	tag = send(m1.addr, egreKey, 0x2000, 64, 9)
	want.Decapsulated++
	check("padded outer frame", want, true, tag, 64)
	tag = send(m1.addr, egreKey, 0x2000, 14+16, 0)
	want.Decapsulated++
	check("short inner frame", want, true, tag, 60)
}

// egreFrame builds an EGRE frame the way gretap does.
func egreFrame(dst, src net.HardwareAddr, from, to netip.Addr, key uint32, greFlags uint16, inner []byte) []byte {
	f := make([]byte, 42, 42+len(inner))
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(inner)))
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	ip[8] = 64
	ip[9] = unix.IPPROTO_GRE
	copy(ip[12:16], from.AsSlice())
	copy(ip[16:20], to.AsSlice())
	binary.BigEndian.PutUint16(ip[10:], inetChecksum(ip))
	binary.BigEndian.PutUint16(f[34:], greFlags)
	binary.BigEndian.PutUint16(f[36:], 0x6558)
	binary.BigEndian.PutUint32(f[38:], key)
	return append(f, inner...)
}

// checkWireFormat compares the first 42 bytes of frame f, sent by m1's
// node through the tunnel, with what gretap would have put there.
func checkWireFormat(t *testing.T, cf capturedFrame, m1, m2 *egreMachine) {
	t.Helper()
	f := cf.b
	want := egreFrame(m2.ulMAC, m1.ulMAC, m1.addr, m2.addr, egreKey, 0x2000, make([]byte, cf.n-42))
	if !bytes.Equal(f[:42], want[:42]) {
		t.Errorf("EGRE header differs from gretap's:\n got  % x\n want % x", f[:42], want[:42])
	}
	// The same, field by field, for a readable failure.
	ip := f[14:34]
	switch {
	case binary.BigEndian.Uint16(f[12:]) != unix.ETH_P_IP:
		t.Errorf("outer ethertype %#04x", binary.BigEndian.Uint16(f[12:]))
	case ip[0] != 0x45 || ip[9] != 47 || ip[8] != 64:
		t.Errorf("outer IPv4 version/IHL %#x, protocol %d, TTL %d", ip[0], ip[9], ip[8])
	case binary.BigEndian.Uint16(ip[6:])&0x4000 == 0:
		t.Error("outer IPv4 DF not set")
	case inetChecksum(ip) != 0:
		t.Error("outer IPv4 header checksum invalid")
	case binary.BigEndian.Uint16(f[34:]) != 0x2000 || binary.BigEndian.Uint16(f[36:]) != 0x6558:
		t.Errorf("GRE flags %#04x protocol %#04x", binary.BigEndian.Uint16(f[34:]), binary.BigEndian.Uint16(f[36:]))
	case binary.BigEndian.Uint32(f[38:]) != egreKey:
		t.Errorf("GRE key %#x", binary.BigEndian.Uint32(f[38:]))
	case !bytes.Equal(f[42+6:42+12], m1.node.mac):
		t.Errorf("inner source MAC %v, want the sender's %v", net.HardwareAddr(f[48:54]), m1.node.mac)
	case int(binary.BigEndian.Uint16(ip[2:])) != cf.n-14:
		t.Errorf("outer IPv4 total length %d, frame %d bytes", binary.BigEndian.Uint16(ip[2:]), cf.n)
	}
}

// testEGREDetach deletes the tunnels and removes the decap programs.
func testEGREDetach(t *testing.T, m1, m2 *egreMachine) {
	for _, m := range []*egreMachine{m1, m2} {
		if err := m.decap.Delete(egreKey, m.peer.addr); err != nil {
			t.Fatal(err)
		}
		if n, err := m.decap.Len(); err != nil || n != 0 {
			t.Fatalf("%s: Len = %d, %v after Delete", m.name, n, err)
		}
		if c := keyCounts(t, m.decap); len(c) != 0 {
			t.Fatalf("%s: keys map %v after Delete", m.name, c)
		}
	}
	// Tunnel gone: m2's packets arrive at m1 with a key m1 no longer has.
	before, _ := m1.decap.Counters()
	_ = egrePing(m2.node.ns, m1.node.addr4, 300*time.Millisecond)
	_ = egreRawFrameType(m2.node, m1.node, nil, testEtherType, 1)
	after, _ := m1.decap.Counters()
	if after.UnknownKey <= before.UnknownKey || after.Decapsulated != before.Decapsulated {
		t.Errorf("after Delete: counters %+v -> %+v; want UnknownKey up, Decapsulated unchanged", before, after)
	}

	// m2's underlay has a filter of someone else: its clsact stays.
	foreign := addForeignEgressFilter(t, m2)
	for _, m := range []*egreMachine{m1, m2} {
		if err := m.decap.Detach(); err != nil {
			t.Fatal(err)
		}
		if fs := egreFilters(t, m, netlink.HANDLE_MIN_INGRESS, m.underlay); len(fs) != 0 {
			t.Errorf("%s: ingress filters %v left after Detach", m.name, filterNames(fs))
		}
	}
	if !hasClsact(t, m2) {
		t.Error("m2: clsact removed although another filter was on it")
	}
	if err := m2.nl.FilterDel(foreign); err != nil {
		t.Fatal(err)
	}
	// Detaching again is fine, and now removes the clsact.
	if err := m2.decap.Detach(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*egreMachine{m1, m2} {
		if hasClsact(t, m) {
			t.Errorf("%s: clsact left on %s", m.name, egreUlName)
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			if fs := egreFilters(t, m, parent, m.underlay); len(fs) != 0 {
				t.Errorf("%s: filters %v left on %s", m.name, filterNames(fs), egreUlName)
			}
		}
		// The maps stay readable until Close.
		if _, err := m.decap.Counters(); err != nil {
			t.Errorf("%s: Counters after Detach: %v", m.name, err)
		}
	}
	// The machines' own traffic still flows.
	if err := egrePing(m1.ns, net.IP(m2.addr.AsSlice()), 2*time.Second); err != nil {
		t.Errorf("underlay ping after Detach: %v", err)
	}
}

func addForeignEgressFilter(t *testing.T, m *egreMachine) *netlink.BpfFilter {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "test_pass",
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1 /* TC_ACT_UNSPEC */), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: m.underlay,
			Parent:    netlink.HANDLE_MIN_EGRESS,
			Handle:    1,
			Priority:  7,
			Protocol:  unix.ETH_P_ALL,
		},
		Fd:           prog.FD(),
		Name:         "someone_else",
		DirectAction: true,
	}
	if err := m.nl.FilterAdd(f); err != nil {
		t.Fatal(err)
	}
	return f
}

func hasClsact(t *testing.T, m *egreMachine) bool {
	t.Helper()
	link, err := m.nl.LinkByIndex(m.underlay)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := m.nl.QdiscList(link)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if _, ok := q.(*netlink.Clsact); ok {
			return true
		}
	}
	return false
}

func egreFilters(t *testing.T, m *egreMachine, parent uint32, ifindex int) []*netlink.BpfFilter {
	t.Helper()
	fs, err := listFilters(m.nl, ifindex, parent)
	if err != nil {
		t.Fatal(err)
	}
	var out []*netlink.BpfFilter
	for _, f := range fs {
		bf, ok := f.(*netlink.BpfFilter)
		if !ok {
			t.Fatalf("%s: unexpected filter %v", m.name, f)
		}
		out = append(out, bf)
	}
	return out
}

func filterNames(fs []*netlink.BpfFilter) []string {
	var names []string
	for _, f := range fs {
		names = append(names, f.Name)
	}
	return names
}

// inMachine runs fn on a thread in m's namespace, failing the test on error.
func inMachine(t *testing.T, m *egreMachine, fn func() error) {
	t.Helper()
	if err := inNS(m.ns, fn); err != nil {
		t.Fatalf("%s: %v", m.name, err)
	}
}

// setupEGRE builds the two machines and their nodes (see the top of the
// file) and registers their removal. The first cleanup registered, so the
// last to run, checks that the root namespace is as it was.
func setupEGRE(t *testing.T) (*egreMachine, *egreMachine) {
	t.Helper()
	pid := os.Getpid()
	var names []string
	testkit.LeaveHostAsFound(t)
	before := rootState(t)
	t.Cleanup(func() {
		// Other tests may add and remove root links meanwhile: compare the
		// links present before and after.
		after := rootState(t)
		for name, st := range before {
			if a, ok := after[name]; ok && a != st {
				t.Errorf("root namespace: link %s changed: %s -> %s", name, st, a)
			}
		}
		for name := range after {
			if _, ok := before[name]; !ok && (name == egreUlName || name == egrePort || name == nodeIfName) {
				t.Errorf("root namespace: link %s appeared", name)
			}
		}
		for _, n := range names {
			if _, err := os.Stat("/run/netns/" + n); !os.IsNotExist(err) {
				t.Errorf("namespace %s left behind (stat: %v)", n, err)
			}
		}
	})
	newNS := func(suffix string) (string, netns.NsHandle, *netlink.Handle) {
		name := fmt.Sprintf("trellis-egre-%d-%s", pid, suffix)
		names = append(names, name)
		_ = netns.DeleteNamed(name) // leftover of a crashed run with our pid
		var ns netns.NsHandle
		if err := onLockedThread(func() (err error) { ns, err = netns.NewNamed(name); return }); err != nil {
			t.Fatalf("creating namespace %s: %v", name, err)
		}
		nl, err := netlink.NewHandleAt(ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			nl.Close()
			ns.Close()
			if err := netns.DeleteNamed(name); err != nil {
				t.Errorf("deleting namespace %s: %v", name, err)
			}
		})
		lo, err := nl.LinkByName("lo")
		if err == nil {
			err = nl.LinkSetUp(lo)
		}
		if err != nil {
			t.Fatal(err)
		}
		return name, ns, nl
	}

	var ms [2]*egreMachine
	for i := range ms {
		m := &egreMachine{name: fmt.Sprintf("m%d", i+1), addr: netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)})}
		m.nsName, m.ns, m.nl = newNS(m.name)
		n := &egreNode{
			addr4: net.IPv4(10, 77, 0, byte(i+1)).To4(),
			addr6: net.ParseIP(fmt.Sprintf("fd77::%d", i+1)),
		}
		n.nsName, n.ns, n.nl = newNS(fmt.Sprintf("n%d", i+1))
		m.node = n
		ms[i] = m
	}
	m1, m2 := ms[0], ms[1]
	m1.peer, m2.peer = m2, m1

	// The underlay: ul0 in m1 and its peer ul0 in m2.
	err := m1.nl.LinkAdd(&netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: egreUlName, MTU: 1500},
		PeerName:      egreUlName,
		PeerMTU:       1500,
		PeerNamespace: netlink.NsFd(int(m2.ns)),
	})
	if err != nil {
		t.Fatalf("adding underlay veth: %v", err)
	}
	for _, m := range ms {
		ul, err := m.nl.LinkByName(egreUlName)
		if err != nil {
			t.Fatal(err)
		}
		m.underlay, m.ulMAC = ul.Attrs().Index, ul.Attrs().HardwareAddr
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(m.addr.AsSlice()), Mask: net.CIDRMask(24, 32)}}
		if err := m.nl.AddrAdd(ul, addr); err != nil {
			t.Fatal(err)
		}
		if err := m.nl.LinkSetUp(ul); err != nil {
			t.Fatal(err)
		}

		// The node's interface and its tunnel port.
		n := m.node
		err = m.nl.LinkAdd(&netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: egrePort, MTU: egreNodeMTU},
			PeerName:      nodeIfName,
			PeerMTU:       egreNodeMTU,
			PeerNamespace: netlink.NsFd(int(n.ns)),
		})
		if err != nil {
			t.Fatalf("%s: adding port veth: %v", m.name, err)
		}
		port, err := m.nl.LinkByName(egrePort)
		if err != nil {
			t.Fatal(err)
		}
		m.port = port.Attrs().Index
		if err := m.nl.LinkSetUp(port); err != nil {
			t.Fatal(err)
		}
		eth, err := n.nl.LinkByName(nodeIfName)
		if err != nil {
			t.Fatal(err)
		}
		n.ifindex, n.mac = eth.Attrs().Index, eth.Attrs().HardwareAddr
		for _, a := range []*netlink.Addr{
			{IPNet: &net.IPNet{IP: n.addr4, Mask: net.CIDRMask(24, 32)}},
			{IPNet: &net.IPNet{IP: n.addr6, Mask: net.CIDRMask(64, 128)}, Flags: unix.IFA_F_NODAD},
		} {
			if err := n.nl.AddrAdd(eth, a); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.nl.LinkSetUp(eth); err != nil {
			t.Fatal(err)
		}
	}
	return m1, m2
}

// rootState describes every link of the root namespace by the things the
// EGRE API changes: qdiscs, tc filters and IPv4 forwarding.
func rootState(t *testing.T) map[string]string {
	t.Helper()
	st := map[string]string{}
	err := onLockedThread(func() error {
		// The main thread never leaves the namespace the test started in.
		root, err := netns.GetFromPid(os.Getpid())
		if err != nil {
			return err
		}
		defer root.Close()
		if err := netns.Set(root); err != nil {
			return err
		}
		h := &netlink.Handle{}
		var links []netlink.Link
		for range 5 {
			if links, err = h.LinkList(); !errors.Is(err, netlink.ErrDumpInterrupted) {
				break
			}
		}
		if err != nil {
			return err
		}
		for _, l := range links {
			name := l.Attrs().Name
			var b strings.Builder
			fwd, _ := os.ReadFile("/proc/sys/net/ipv4/conf/" + name + "/forwarding")
			fmt.Fprintf(&b, "forwarding=%s", strings.TrimSpace(string(fwd)))
			qs, _ := h.QdiscList(l)
			for _, q := range qs {
				fmt.Fprintf(&b, " qdisc=%s", q.Type())
			}
			for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
				fs, _ := h.FilterList(l, parent)
				for _, f := range fs {
					if bf, ok := f.(*netlink.BpfFilter); ok {
						fmt.Fprintf(&b, " filter=%s", bf.Name)
					}
				}
			}
			st[name] = b.String()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the root namespace: %v", err)
	}
	return st
}

func waitNeighbour(t *testing.T, h *netlink.Handle, ifindex int, ip net.IP, mac net.HardwareAddr) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		if neighValid(t, h, ifindex, ip, mac) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("neighbour %v -> %v not resolved on %d", ip, mac, ifindex)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func neighValid(t *testing.T, h *netlink.Handle, ifindex int, ip net.IP, mac net.HardwareAddr) bool {
	t.Helper()
	neighs, err := h.NeighList(ifindex, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	const valid = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE
	for _, ne := range neighs {
		if ne.IP.Equal(ip) && ne.State&valid != 0 && bytes.Equal(ne.HardwareAddr, mac) {
			return true
		}
	}
	return false
}

func nodeHasNeighbour(t *testing.T, n *egreNode, ip net.IP, mac net.HardwareAddr) bool {
	return neighValid(t, n.nl, n.ifindex, ip, mac)
}

func flushNodeNeighbours(t *testing.T, n *egreNode) {
	t.Helper()
	neighs, err := n.nl.NeighList(n.ifindex, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range neighs {
		if err := n.nl.NeighDel(&neighs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			t.Fatal(err)
		}
	}
}

// egrePing sends one ICMP (or ICMPv6) echo request from inside ns to dst
// and waits for the matching reply.
func egrePing(ns netns.NsHandle, dst net.IP, timeout time.Duration) error {
	v4 := dst.To4() != nil
	family, proto, reqType, replyType := unix.AF_INET, unix.IPPROTO_ICMP, byte(8), byte(0)
	if !v4 {
		family, proto, reqType, replyType = unix.AF_INET6, unix.IPPROTO_ICMPV6, 128, 129
	}
	fd, err := socketIn(ns, family, unix.SOCK_RAW, proto)
	if err != nil {
		return fmt.Errorf("icmp socket: %w", err)
	}
	defer unix.Close(fd)

	payload := nonce()
	id := binary.BigEndian.Uint16(payload)
	req := make([]byte, 8+len(payload))
	req[0] = reqType
	binary.BigEndian.PutUint16(req[4:], id)
	binary.BigEndian.PutUint16(req[6:], 1)
	copy(req[8:], payload)
	var to unix.Sockaddr
	if v4 {
		binary.BigEndian.PutUint16(req[2:], inetChecksum(req))
		sa := &unix.SockaddrInet4{}
		copy(sa.Addr[:], dst.To4())
		to = sa
	} else {
		// The kernel fills in ICMPv6 checksums on raw sockets.
		sa := &unix.SockaddrInet6{}
		copy(sa.Addr[:], dst.To16())
		to = sa
	}

	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	// Resend every 500ms: the first request may wait for neighbour
	// resolution and be dropped.
	for time.Now().Before(deadline) {
		if err := unix.Sendto(fd, req, 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
			return fmt.Errorf("sending echo request: %w", err)
		}
		resend := time.Now().Add(500 * time.Millisecond)
		for {
			left := time.Until(resend)
			if left <= 0 {
				break
			}
			tv := unix.NsecToTimeval(left.Nanoseconds())
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return err
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return fmt.Errorf("receiving: %w", err)
			}
			pkt := buf[:n]
			if v4 {
				if len(pkt) < 20 || !net.IP(pkt[12:16]).Equal(dst) {
					continue
				}
				pkt = pkt[int(pkt[0]&0x0f)*4:]
			} else if sa, ok := from.(*unix.SockaddrInet6); !ok || !net.IP(sa.Addr[:]).Equal(dst) {
				continue
			}
			if len(pkt) >= 8 && pkt[0] == replyType && binary.BigEndian.Uint16(pkt[4:]) == id && bytes.Equal(pkt[8:], payload) {
				return nil
			}
		}
	}
	return fmt.Errorf("no echo reply from %v within %v", dst, timeout)
}

type vlanTag struct{ tpid, tci uint16 }

func openRawRx(t *testing.T, n *egreNode) int {
	t.Helper()
	fd, err := socketIn(n.ns, unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: n.ifindex}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	return fd
}

// recvTagged waits for an incoming frame containing tag, and returns
// whether it came and its length.
func recvTagged(fd int, tag []byte, timeout time.Duration) (bool, int) {
	f, _ := recvFrame(fd, tag, timeout)
	return f != nil, len(f)
}

// recvFrame waits for an incoming frame containing tag and returns it with
// the VLAN tag the kernel took out of it (tpid 0 if none).
func recvFrame(fd int, tag []byte, timeout time.Duration) ([]byte, vlanTag) {
	buf := make([]byte, 9000)
	oob := make([]byte, 256)
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, vlanTag{}
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		n, oobn, _, from, err := unix.Recvmsg(fd, buf, oob, 0)
		if err != nil {
			continue
		}
		if sa, ok := from.(*unix.SockaddrLinklayer); ok && sa.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if !bytes.Contains(buf[:n], tag) {
			continue
		}
		var vt vlanTag
		if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, c := range cmsgs {
				if c.Header.Level == unix.SOL_PACKET && c.Header.Type == unix.PACKET_AUXDATA && len(c.Data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
					aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&c.Data[0]))
					if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 {
						vt = vlanTag{tpid: aux.Vlan_tpid, tci: aux.Vlan_tci}
					}
				}
			}
		}
		return append([]byte(nil), buf[:n]...), vt
	}
}

// egreRawFrame sends a frame of testEtherType, inside the given VLAN tags,
// from from's eth1 and waits for it, tags and all, on to's eth1.
// It sends up to 4 times: this machine may be busy with other tests, whose
// load makes the kernel drop frames (a full per-CPU backlog).
func egreRawFrame(from, to *egreNode, tags []vlanTag) error {
	return egreRawFrameType(from, to, tags, testEtherType, 4)
}

// egreRawFrameType is egreRawFrame with another ethertype and number of
// tries.
func egreRawFrameType(from, to *egreNode, tags []vlanTag, etherType uint16, tries int) error {
	rx, err := socketIn(to.ns, unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return err
	}
	defer unix.Close(rx)
	if err := unix.Bind(rx, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: to.ifindex}); err != nil {
		return err
	}
	if err := unix.SetsockoptInt(rx, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		return err
	}
	tx, err := socketIn(from.ns, unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(tx)

	tag := nonce()
	frame := make([]byte, 0, 64)
	frame = append(frame, to.mac...)
	frame = append(frame, from.mac...)
	for _, vt := range tags {
		frame = binary.BigEndian.AppendUint16(frame, vt.tpid)
		frame = binary.BigEndian.AppendUint16(frame, vt.tci)
	}
	frame = binary.BigEndian.AppendUint16(frame, etherType)
	frame = append(frame, tag...)
	for len(frame) < 60 {
		frame = append(frame, 0)
	}
	dst := &unix.SockaddrLinklayer{Ifindex: from.ifindex, Halen: 6}
	copy(dst.Addr[:], to.mac)
	var (
		got []byte
		vt  vlanTag
	)
	for range tries {
		// ENOBUFS: dropped on a full backlog; try again.
		if err := unix.Sendto(tx, frame, 0, dst); err != nil && !errors.Is(err, unix.ENOBUFS) {
			return fmt.Errorf("sending frame: %w", err)
		}
		if got, vt = recvFrame(rx, tag, 500*time.Millisecond); got != nil {
			break
		}
	}
	if got == nil {
		return errors.New("frame did not arrive")
	}
	// The receiving kernel moves the outermost tag out of the frame.
	want := frame
	var wantTag vlanTag
	if len(tags) > 0 {
		wantTag = tags[0]
		want = append(append([]byte(nil), frame[:12]...), frame[16:]...)
	}
	if vt != wantTag {
		return fmt.Errorf("arrived with VLAN tag %x, want %x", vt, wantTag)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("arrived changed:\n got  % x\n want % x", got, want)
	}
	return nil
}

// egreTCP sends size random bytes over TCP from node from to dst (an
// address of node to) and checks that exactly they arrive.
func egreTCP(t *testing.T, from, to *egreNode, dst net.IP, size int) {
	t.Helper()
	var ln net.Listener
	err := inNS(to.ns, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(dst.String(), "0"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	type result struct {
		n   int64
		sum [32]byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		h := sha256.New()
		n, err := io.Copy(h, c)
		var r result
		r.n, r.err = n, err
		copy(r.sum[:], h.Sum(nil))
		done <- r
	}()

	data := make([]byte, size)
	_, _ = rand.Read(data)
	var c net.Conn
	err = inNS(from.ns, func() (err error) {
		c, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(data); err != nil {
		c.Close()
		t.Fatalf("writing: %v", err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	c.Close()
	if r.err != nil {
		t.Fatalf("receiving: %v", r.err)
	}
	if r.n != int64(size) || r.sum != sha256.Sum256(data) {
		t.Fatalf("received %d bytes (sha256 match %v), sent %d", r.n, r.sum == sha256.Sum256(data), size)
	}
	el := time.Since(start)
	t.Logf("%d MiB over TCP to %v in %v (%.0f Mbit/s)", size>>20, dst, el.Round(time.Millisecond), float64(size)*8/el.Seconds()/1e6)
}

// underlayCapture records the EGRE frames arriving on a machine's
// underlay: their first bytes and their lengths.
type underlayCapture struct {
	fd     int
	mu     sync.Mutex
	frames []capturedFrame
	max    int
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

type capturedFrame struct {
	b []byte // at most the first 256 bytes
	n int    // length on the wire
}

func startCapture(t *testing.T, m *egreMachine) *underlayCapture {
	t.Helper()
	fd, err := socketIn(m.ns, unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: m.underlay}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	c := &underlayCapture{fd: fd, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		buf := make([]byte, 256)
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			// MSG_TRUNC: n is the frame's real length.
			n, from, err := unix.Recvfrom(fd, buf, unix.MSG_TRUNC)
			if err != nil {
				continue // timeout (EAGAIN), EINTR
			}
			if sa, ok := from.(*unix.SockaddrLinklayer); ok && sa.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			if n < 42 || binary.BigEndian.Uint16(buf[12:]) != unix.ETH_P_IP || buf[23] != unix.IPPROTO_GRE {
				continue
			}
			c.mu.Lock()
			c.max = max(c.max, n)
			if len(c.frames) < 100000 {
				c.frames = append(c.frames, capturedFrame{append([]byte(nil), buf[:min(n, len(buf))]...), n})
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.close)
	return c
}

// find returns the first captured frame that match accepts, waiting up to a
// second for it.
func (c *underlayCapture) find(match func(f capturedFrame) bool) (capturedFrame, bool) {
	deadline := time.Now().Add(time.Second)
	for {
		c.mu.Lock()
		for _, f := range c.frames {
			if match(f) {
				c.mu.Unlock()
				return f, true
			}
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			return capturedFrame{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *underlayCapture) maxLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}

func (c *underlayCapture) reset() {
	c.mu.Lock()
	c.frames, c.max = nil, 0
	c.mu.Unlock()
}

// close stops the reader, then closes the socket (never under a blocked
// reader, whose fd number could be reused meanwhile).
func (c *underlayCapture) close() {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		unix.Close(c.fd)
	})
}

// testEGRENeighbourChange checks that the encapsulation's template of the
// outer MAC addresses follows a change of the underlay neighbour within
// EncapRouteTTL: frames stop crossing once the neighbour entry names a MAC
// address the other machine does not have (its underlay drops them as not
// its own), and cross again once the entry is right.
func testEGRENeighbourChange(t *testing.T, m *egreMachine) {
	peerIP := net.IP(m.peer.addr.AsSlice())
	set := func(mac net.HardwareAddr) {
		t.Helper()
		err := m.nl.NeighSet(&netlink.Neigh{LinkIndex: m.underlay, Family: netlink.FAMILY_V4, IP: peerIP,
			HardwareAddr: mac, State: netlink.NUD_PERMANENT})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		m.nl.NeighDel(&netlink.Neigh{LinkIndex: m.underlay, Family: netlink.FAMILY_V4, IP: peerIP})
		inMachine(t, m, func() error { return PrimeNeighbour(m.underlay, m.peer.addr) })
	})
	if err := egrePing(m.node.ns, m.peer.node.addr4, 3*time.Second); err != nil {
		t.Fatalf("ping before the change: %v", err)
	}
	set(net.HardwareAddr{0x02, 0, 0, 0, 0xde, 0xad})
	time.Sleep(EncapRouteTTL + 200*time.Millisecond)
	if err := egrePing(m.node.ns, m.peer.node.addr4, 500*time.Millisecond); err == nil {
		t.Fatalf("ping crossed %v after the neighbour entry was changed to a wrong MAC address", EncapRouteTTL)
	}
	set(m.peer.ulMAC)
	if err := egrePing(m.node.ns, m.peer.node.addr4, EncapRouteTTL+2*time.Second); err != nil {
		t.Fatalf("ping after the neighbour entry was put right: %v", err)
	}
}
