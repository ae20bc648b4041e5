//go:build integration

package dataplane

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The test builds the smallest Trellis link by hand:
//
//	ns A: eth1 10.99.0.1/24 ══ veth ══ port A ─┐  root namespace,
//	                                            │  shortbridge on both
//	ns B: eth1 10.99.0.2/24 ══ veth ══ port B ─┘  ports' tc ingress
//
// and checks that IPv4 (ping), ARP and non-IP frames cross it in both
// delivery modes.

const (
	testEtherType = 0x88b5 // IEEE 802 local experimental ethertype 1
	nodeIfName    = "eth1"
)

var (
	nodeAddrA = net.IPv4(10, 99, 0, 1).To4()
	nodeAddrB = net.IPv4(10, 99, 0, 2).To4()
)

// testNode is one side of the test link.
type testNode struct {
	nsName   string
	ns       netns.NsHandle
	nl       *netlink.Handle // netlink handle inside ns
	ifindex  int             // of eth1, inside ns
	mac      net.HardwareAddr
	addr     net.IP
	portName string
	port     int // ifindex of the port, in the root namespace
}

type testLink struct {
	a, b *testNode
	// progIDs are the kernel ids of every shortbridge program seen on the
	// ports; all must be gone once the ports are.
	progIDs []ebpf.ProgramID
}

// TestShortbridge runs on each hook the kernel has (tcx and clsact).
func TestShortbridge(t *testing.T) {
	testkit.RequireRoot(t)
	for _, hook := range testHooks(t) {
		t.Run(string(hook), func(t *testing.T) {
			useHook(t, hook)
			testShortbridge(t, hook)
		})
	}
}

func testShortbridge(t *testing.T, hook Hook) {
	l := setupTestLink(t)

	// Before anything is attached the ports are plain unconnected veth ends.
	for _, n := range []*testNode{l.a, l.b} {
		if ok, err := ShortbridgeAttached(n.port); err != nil || ok {
			t.Fatalf("ShortbridgeAttached(%s) before attach = %v, %v; want false, nil", n.portName, ok, err)
		}
	}
	if err := icmpEcho(l.a, l.b.addr, 500*time.Millisecond); err == nil {
		t.Fatal("ping crossed the ports before any shortbridge was attached")
	}

	for _, tc := range []struct {
		name        string
		deliverPeer bool
	}{
		{"redirect", false},
		{"redirect_peer", true},
		// Back again: switching mode replaces the filter in place.
		{"redirect_again", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attachConcurrently(t, l, tc.deliverPeer)
			for _, n := range []*testNode{l.a, l.b} {
				ok, err := ShortbridgeAttached(n.port)
				if err != nil || !ok {
					t.Fatalf("ShortbridgeAttached(%s) = %v, %v; want true, nil", n.portName, ok, err)
				}
				ids := shortbridgeProgIDs(t, n.port, hook)
				if len(ids) != 1 {
					t.Fatalf("%s has %d shortbridge programs, want exactly 1", n.portName, len(ids))
				}
				l.progIDs = append(l.progIDs, ids...)
			}

			flushNeighbours(t, l.a)
			flushNeighbours(t, l.b)
			if hasNeighbour(t, l.a, l.b.addr, l.b.mac) {
				t.Fatal("ARP entry for B still present after flush")
			}

			// IPv4 both ways (this needs ARP to cross first).
			if err := icmpEcho(l.a, l.b.addr, 2*time.Second); err != nil {
				t.Fatalf("ping A->B: %v", err)
			}
			if err := icmpEcho(l.b, l.a.addr, 2*time.Second); err != nil {
				t.Fatalf("ping B->A: %v", err)
			}

			// ARP resolved through the link, to the real MAC of B's eth1.
			if !hasNeighbour(t, l.a, l.b.addr, l.b.mac) {
				t.Fatalf("no valid ARP entry for %v (%v) in ns A", l.b.addr, l.b.mac)
			}
			if !hasNeighbour(t, l.b, l.a.addr, l.a.mac) {
				t.Fatalf("no valid ARP entry for %v (%v) in ns B", l.a.addr, l.a.mac)
			}

			// A non-IP Ethernet frame, both ways.
			if err := sendRawFrame(l.a, l.b); err != nil {
				t.Fatalf("ethertype %#x A->B: %v", testEtherType, err)
			}
			if err := sendRawFrame(l.b, l.a); err != nil {
				t.Fatalf("ethertype %#x B->A: %v", testEtherType, err)
			}

			// With every frame dropped on the ports' egress, only
			// bpf_redirect_peer (which skips the peer port's egress)
			// still delivers. This tells the two modes apart.
			dropEgress(t, l)
			err := icmpEcho(l.a, l.b.addr, 500*time.Millisecond)
			switch {
			case tc.deliverPeer && err != nil:
				t.Fatalf("deliverPeer: ping with egress drop on ports failed, so the ports' egress was not skipped: %v", err)
			case !tc.deliverPeer && err == nil:
				t.Fatal("redirect: ping crossed a port whose egress drops everything, so the egress was skipped")
			}
		})
	}
}

func TestAttachShortbridgeErrors(t *testing.T) {
	testkit.RequireRoot(t)
	if err := AttachShortbridge(cfg, 0, 1, false); err == nil {
		t.Error("AttachShortbridge(0, ...) succeeded")
	}
	const missing = 0x7ffffff0
	err := AttachShortbridge(cfg, missing, 1, false)
	if err == nil {
		t.Fatal("AttachShortbridge on a missing port succeeded")
	}
	if !strings.Contains(err.Error(), fmt.Sprint(missing)) {
		t.Errorf("error %q does not name the port index %d", err, missing)
	}
	if _, err := ShortbridgeAttached(missing); err == nil {
		t.Error("ShortbridgeAttached on a missing port succeeded")
	}
}

// attachConcurrently attaches both directions many times at once, as the
// substrate does when it brings up hundreds of ports in parallel.
func attachConcurrently(t *testing.T, l *testLink, deliverPeer bool) {
	t.Helper()
	const rounds = 32
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for range rounds {
		wg.Go(func() { errs <- AttachShortbridge(cfg, l.a.port, l.b.port, deliverPeer) })
		wg.Go(func() { errs <- AttachShortbridge(cfg, l.b.port, l.a.port, deliverPeer) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// shortbridgeProgIDs returns the ids of the programs on the port's ingress (tcx and tc
// filters), failing on any that is not a shortbridge on hook.
func shortbridgeProgIDs(t *testing.T, port int, hook Hook) []ebpf.ProgramID {
	t.Helper()
	want := shortbridgeFilterName + "@2"
	if hook == HookTCX {
		want = "tcx:" + shortbridgeProgName
	}
	layout, byName := ingressLayout(t, port)
	var ids []ebpf.ProgramID
	for _, part := range strings.Fields(layout) {
		if part != want {
			t.Errorf("unexpected program %q on port %d (want %s)", part, port, want)
		}
		ids = append(ids, byName[strings.TrimSuffix(part, "@2")])
	}
	return ids
}

// progsGone waits until none of ids names a loaded program any more (the
// kernel frees programs after an RCU grace period).
func progsGone(ids []ebpf.ProgramID) []ebpf.ProgramID {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var alive []ebpf.ProgramID
		for _, id := range ids {
			p, err := ebpf.NewProgramFromID(id)
			if err == nil {
				p.Close()
				alive = append(alive, id)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return alive
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dropEgress puts a TC_ACT_SHOT program on the egress of both ports until
// the calling (sub)test ends.
func dropEgress(t *testing.T, l *testLink) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "trellis_drop",
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* TC_ACT_SHOT */), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	for _, n := range []*testNode{l.a, l.b} {
		// A port with its shortbridge on tcx has no clsact qdisc yet.
		if err := ensureClsact(n.port); err != nil {
			t.Fatal(err)
		}
		f := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{
				LinkIndex: n.port,
				Parent:    netlink.HANDLE_MIN_EGRESS,
				Handle:    1,
				Priority:  1,
				Protocol:  unix.ETH_P_ALL,
			},
			Fd:           prog.FD(),
			Name:         "trellis_test_drop",
			DirectAction: true,
		}
		if err := netlink.FilterAdd(f); err != nil {
			t.Fatalf("adding egress drop on %s: %v", n.portName, err)
		}
		t.Cleanup(func() {
			if err := netlink.FilterDel(f); err != nil {
				t.Errorf("removing egress drop on %s: %v", n.portName, err)
			}
		})
	}
}

// setupTestLink builds the two namespaces and the two veth pairs, and
// registers their removal. The first cleanup registered (so the last to
// run) checks that the root namespace is left as it was found.
func setupTestLink(t *testing.T) *testLink {
	t.Helper()
	pid := os.Getpid()
	l := &testLink{
		a: &testNode{
			nsName:   fmt.Sprintf("trellis-dp-test-%d-a", pid),
			portName: fmt.Sprintf("tdpA%d", pid),
			addr:     nodeAddrA,
		},
		b: &testNode{
			nsName:   fmt.Sprintf("trellis-dp-test-%d-b", pid),
			portName: fmt.Sprintf("tdpB%d", pid),
			addr:     nodeAddrB,
		},
	}

	testkit.LeaveHostAsFound(t)
	before := rootLinks(t)
	t.Cleanup(func() {
		ours := map[string]bool{l.a.portName: true, l.b.portName: true}
		oursIdx := map[int]bool{l.a.port: true, l.b.port: true}
		after := rootLinks(t)
		for idx, name := range after {
			if before[idx] == name {
				continue
			}
			if ours[name] || oursIdx[idx] {
				t.Errorf("root namespace: link %d %q left behind", idx, name)
			} else {
				// Other tests on this machine may create and delete
				// links meanwhile: only our own leftovers are errors.
				t.Logf("root namespace: link %d %q appeared (not created by this test)", idx, name)
			}
		}
		for idx, name := range before {
			if after[idx] != name {
				// This test deletes links by its own names only.
				t.Logf("root namespace: link %d %q went away (not deleted by this test)", idx, name)
			}
		}
		if alive := progsGone(l.progIDs); len(alive) > 0 {
			t.Errorf("shortbridge programs %v outlived their ports", alive)
		}
		for _, n := range []*testNode{l.a, l.b} {
			if _, err := os.Stat("/run/netns/" + n.nsName); !os.IsNotExist(err) {
				t.Errorf("namespace %s left behind (stat: %v)", n.nsName, err)
			}
		}
	})

	for _, n := range []*testNode{l.a, l.b} {
		createNode(t, n)
	}
	return l
}

func createNode(t *testing.T, n *testNode) {
	t.Helper()
	_ = netns.DeleteNamed(n.nsName) // a leftover of a crashed run with our pid

	// netns.NewNamed moves the calling thread into the new namespace, so it
	// runs on a thread of its own.
	err := onLockedThread(func() error {
		ns, err := netns.NewNamed(n.nsName)
		n.ns = ns
		return err
	})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", n.nsName, err)
	}
	t.Cleanup(func() {
		if n.nl != nil {
			n.nl.Close()
		}
		n.ns.Close()
		if err := netns.DeleteNamed(n.nsName); err != nil {
			t.Errorf("deleting namespace %s: %v", n.nsName, err)
		}
	})

	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: n.portName},
		PeerName:      nodeIfName,
		PeerNamespace: netlink.NsFd(int(n.ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("adding veth %s: %v", n.portName, err)
	}
	// Deleting the port deletes the pair, and with it the port's filters.
	t.Cleanup(func() {
		if err := netlink.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n.portName}}); err != nil {
			t.Errorf("deleting port %s: %v", n.portName, err)
		}
	})
	port, err := netlink.LinkByName(n.portName)
	if err != nil {
		t.Fatal(err)
	}
	n.port = port.Attrs().Index
	if err := netlink.LinkSetUp(port); err != nil {
		t.Fatal(err)
	}

	if n.nl, err = netlink.NewHandleAt(n.ns); err != nil {
		t.Fatal(err)
	}
	eth, err := n.nl.LinkByName(nodeIfName)
	if err != nil {
		t.Fatal(err)
	}
	n.ifindex = eth.Attrs().Index
	n.mac = eth.Attrs().HardwareAddr
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: n.addr, Mask: net.CIDRMask(24, 32)}}
	if err := n.nl.AddrAdd(eth, addr); err != nil {
		t.Fatal(err)
	}
	if err := n.nl.LinkSetUp(eth); err != nil {
		t.Fatal(err)
	}
}

func rootLinks(t *testing.T) map[int]string {
	t.Helper()
	var links []netlink.Link
	var err error
	for range 5 {
		if links, err = netlink.LinkList(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		t.Fatalf("listing root links: %v", err)
	}
	m := make(map[int]string, len(links))
	for _, l := range links {
		m[l.Attrs().Index] = l.Attrs().Name
	}
	return m
}

// onLockedThread runs fn on an OS thread of its own, which fn may move to
// another network namespace: the thread is moved back afterwards, and if
// that fails it is never handed back to the Go scheduler (it ends with its
// goroutine, still locked).
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("restoring namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// inNS runs fn on a thread switched into ns. Sockets opened by fn stay in
// ns for their whole life, whatever thread later uses them.
func inNS(ns netns.NsHandle, fn func() error) error {
	return onLockedThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("entering namespace: %w", err)
		}
		return fn()
	})
}

func socketIn(ns netns.NsHandle, domain, typ, proto int) (int, error) {
	fd := -1
	err := inNS(ns, func() error {
		var err error
		fd, err = unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
		return err
	})
	return fd, err
}

func nonce() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// icmpEcho sends one small ICMP echo request from inside from's namespace to dst and waits
// for the matching reply: a ping done with a raw socket.
func icmpEcho(from *testNode, dst net.IP, timeout time.Duration) error {
	return icmpEchoSized(from, dst, 0, timeout)
}

func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// sendRawFrame sends an Ethernet frame of testEtherType from from's eth1
// with an AF_PACKET socket and waits for it on to's eth1.
func sendRawFrame(from, to *testNode) error {
	rx, err := socketIn(to.ns, unix.AF_PACKET, unix.SOCK_RAW, int(htons(testEtherType)))
	if err != nil {
		return fmt.Errorf("rx socket: %w", err)
	}
	defer unix.Close(rx)
	if err := unix.Bind(rx, &unix.SockaddrLinklayer{Protocol: htons(testEtherType), Ifindex: to.ifindex}); err != nil {
		return fmt.Errorf("binding rx socket: %w", err)
	}
	tx, err := socketIn(from.ns, unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		return fmt.Errorf("tx socket: %w", err)
	}
	defer unix.Close(tx)

	tag := nonce()
	frame := make([]byte, 60) // minimum Ethernet frame without FCS
	copy(frame[0:6], to.mac)
	copy(frame[6:12], from.mac)
	binary.BigEndian.PutUint16(frame[12:], testEtherType)
	copy(frame[14:], tag)
	dst := &unix.SockaddrLinklayer{Protocol: htons(testEtherType), Ifindex: from.ifindex, Halen: 6}
	copy(dst.Addr[:], to.mac)

	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	buf := make([]byte, 2048)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if err := unix.Sendto(tx, frame, 0, dst); err != nil {
			return fmt.Errorf("sending frame: %w", err)
		}
		for {
			n, _, err := unix.Recvfrom(rx, buf, 0)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				break // resend
			}
			if err != nil {
				return fmt.Errorf("receiving: %w", err)
			}
			if n >= 14+len(tag) && binary.BigEndian.Uint16(buf[12:]) == testEtherType &&
				bytes.Equal(buf[14:14+len(tag)], tag) && bytes.Equal(buf[6:12], from.mac) {
				return nil
			}
		}
	}
	return errors.New("frame did not arrive")
}

func flushNeighbours(t *testing.T, n *testNode) {
	t.Helper()
	neighs, err := n.nl.NeighList(n.ifindex, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range neighs {
		if err := n.nl.NeighDel(&neighs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			t.Fatalf("deleting neighbour %v: %v", neighs[i].IP, err)
		}
	}
}

// hasNeighbour tells whether n's eth1 has a resolved ARP entry ip -> mac.
func hasNeighbour(t *testing.T, n *testNode, ip net.IP, mac net.HardwareAddr) bool {
	t.Helper()
	neighs, err := n.nl.NeighList(n.ifindex, netlink.FAMILY_V4)
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
