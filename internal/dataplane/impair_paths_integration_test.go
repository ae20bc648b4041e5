//go:build integration

package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Corruption, and the impairment filter next to the forwarding filters.

// TestImpairCorruptRawFrames: frames whose checksums are final (here raw
// frames from a packet socket) arrive with exactly one bit flipped,
// anywhere in the frame, headers included.
func TestImpairCorruptRawFrames(t *testing.T) {
	testkit.RequireRoot(t)
	l := impairedLink(t)
	impairA(t, l, Impairment{Corrupt: 100})

	const n = 300
	rx := rawSocket(t, l.b, unix.ETH_P_ALL)
	defer unix.Close(rx)
	tx, err := socketIn(l.a.ns, unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)
	frame := make([]byte, 60)
	copy(frame[0:6], l.b.mac)
	copy(frame[6:12], l.a.mac)
	binary.BigEndian.PutUint16(frame[12:], testEtherType)
	copy(frame[14:], bytes.Repeat(nonce(), 3))
	dst := &unix.SockaddrLinklayer{Protocol: htons(testEtherType), Ifindex: l.a.ifindex, Halen: 6}
	for range n {
		if err := unix.Sendto(tx, frame, 0, dst); err != nil {
			t.Fatal(err)
		}
	}

	// Every frame of 60 bytes that B receives from A's side at a Hamming
	// distance of 0 or 1 from the one sent is ours (ND and MLD frames of
	// A's own IPv6 stack differ in far more bits).
	var dist [2]int
	headerFlips := 0
	buf := make([]byte, 2048)
	for {
		nr, from, err := unix.Recvfrom(rx, buf, 0)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype == unix.PACKET_OUTGOING || nr != len(frame) {
			continue
		}
		d, at := 0, -1
		for i := range frame {
			if x := bits.OnesCount8(buf[i] ^ frame[i]); x > 0 {
				d += x
				at = i
			}
		}
		if d < len(dist) {
			dist[d]++
			if d == 1 && at < 14 {
				headerFlips++
			}
		}
	}
	t.Logf("%d frames with one bit flipped (%d in the Ethernet header), %d intact", dist[1], headerFlips, dist[0])
	if dist[0] != 0 || dist[1] != n {
		t.Errorf("received %d intact frames and %d with one bit flipped, want 0 and %d", dist[0], dist[1], n)
	}
	if headerFlips == 0 || headerFlips == dist[1] {
		t.Errorf("%d of %d flips in the Ethernet header: flips are not spread over the frame", headerFlips, dist[1])
	}
	if c, err := ReadImpairCounters(l.a.port); err != nil || c.Corrupted < n {
		t.Errorf("ReadImpairCounters = %+v, %v; want at least %d corrupted", c, err, n)
	}
}

// TestImpairCorruptDetected: the receiver detects every corrupted frame, be
// its transport checksum left to offload (UDP from a socket:
// CHECKSUM_PARTIAL) or final (ICMP from a raw socket), so no application
// ever gets corrupted data.
func TestImpairCorruptDetected(t *testing.T) {
	testkit.RequireRoot(t)
	l := impairedLink(t)
	// Corrupted ARP would get in the way: A knows B's address beforehand.
	err := l.a.nl.NeighAdd(&netlink.Neigh{
		LinkIndex: l.a.ifindex, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: l.b.addr, HardwareAddr: l.b.mac,
	})
	if err != nil {
		t.Fatal(err)
	}
	impairA(t, l, Impairment{Corrupt: 100})

	const n = 400
	before := snmp(t, l.b)
	got, intact := udpBurst(t, l.a, l.b, n)
	after := snmp(t, l.b)
	ipErr := after["IpExt.InCsumErrors"] - before["IpExt.InCsumErrors"]
	udpErr := after["Udp.InCsumErrors"] - before["Udp.InCsumErrors"]
	t.Logf("UDP: %d of %d datagrams received (%d intact); B counted %d IP and %d UDP checksum errors", got, n, intact, ipErr, udpErr)
	if got != intact {
		t.Errorf("%d of the %d datagrams received were corrupted: the receiver did not detect it", got-intact, got)
	}
	// The flip lands in the Ethernet (112 bits) or IPv4 header (160 bits),
	// never in the UDP datagram, whose checksum is not computed yet: about
	// 59 % of the frames fail the IPv4 header checksum.
	if ipErr < n/3 || udpErr != 0 {
		t.Errorf("B counted %d IP and %d UDP checksum errors for %d datagrams, want at least %d and 0", ipErr, udpErr, n, n/3)
	}

	before = snmp(t, l.b)
	for i := range n {
		if err := icmpSend(l.a, l.b.addr, i); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	after = snmp(t, l.b)
	ipErr = after["IpExt.InCsumErrors"] - before["IpExt.InCsumErrors"]
	icmpErr := after["Icmp.InCsumErrors"] - before["Icmp.InCsumErrors"]
	t.Logf("ICMP: B counted %d IP and %d ICMP checksum errors for %d echo requests", ipErr, icmpErr, n)
	// Frames of 58 bytes: 24 of ICMP, 20 of IPv4, 14 of Ethernet header.
	if icmpErr < n/4 || ipErr < n/5 {
		t.Errorf("B counted %d ICMP and %d IP checksum errors for %d echo requests, want at least %d and %d", icmpErr, ipErr, n, n/4, n/5)
	}
}

// udpBurst sends n datagrams from one node to the other and returns how
// many arrived, and how many of those arrived intact.
func udpBurst(t *testing.T, from, to *testNode, n int) (got, intact int) {
	t.Helper()
	rx, err := socketIn(to.ns, unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rx)
	addr := &unix.SockaddrInet4{Port: 9999}
	copy(addr.Addr[:], to.addr)
	if err := unix.Bind(rx, addr); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(rx, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	tx, err := socketIn(from.ns, unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)

	payload := bytes.Repeat(nonce(), 32)
	for i := range n {
		binary.BigEndian.PutUint32(payload, uint32(i))
		if err := unix.Sendto(tx, payload, 0, addr); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 2048)
	for {
		nr, _, err := unix.Recvfrom(rx, buf, 0)
		if errors.Is(err, unix.EAGAIN) {
			return got, intact
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
		seq := binary.BigEndian.Uint32(buf)
		binary.BigEndian.PutUint32(payload, seq)
		if seq < uint32(n) && bytes.Equal(buf[:nr], payload) {
			intact++
		}
	}
}

// icmpSend sends one echo request (checksum computed here: a frame whose
// checksums are final) without waiting for the reply.
func icmpSend(from *testNode, dst net.IP, seq int) error {
	fd, err := socketIn(from.ns, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	req := make([]byte, 24)
	req[0] = 8
	binary.BigEndian.PutUint16(req[6:], uint16(seq))
	copy(req[8:], nonce())
	binary.BigEndian.PutUint16(req[2:], inetChecksum(req))
	to := &unix.SockaddrInet4{}
	copy(to.Addr[:], dst.To4())
	return unix.Sendto(fd, req, 0, to)
}

// snmp reads the node's /proc/net/snmp and /proc/net/netstat counters as
// "Proto.Name" -> value (IP checksum errors are IpExt.InCsumErrors).
func snmp(t *testing.T, n *testNode) map[string]uint64 {
	t.Helper()
	var text []byte
	err := inNS(n.ns, func() error {
		// thread-self: /proc/net follows the process, not this thread.
		for _, f := range []string{"snmp", "netstat"} {
			b, err := os.ReadFile("/proc/thread-self/net/" + f)
			if err != nil {
				return err
			}
			text = append(text, b...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	lines := strings.Split(string(text), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) != len(values) || len(names) == 0 {
			continue
		}
		proto := strings.TrimSuffix(names[0], ":")
		for j := 1; j < len(names); j++ {
			if v, err := strconv.ParseUint(values[j], 10, 64); err == nil {
				m[proto+"."+names[j]] = v
			}
		}
	}
	return m
}

// ingressLayout describes a port's ingress: its tcx programs in the order they run, as
// "tcx:NAME", then its tc filters as "NAME@PRIORITY" by priority; and returns the program ids
// by those names without the priority.
func ingressLayout(t *testing.T, port int) (string, map[string]ebpf.ProgramID) {
	t.Helper()
	ids := map[string]ebpf.ProgramID{}
	var parts []string
	if kernelHasTCX() {
		ps, _, err := tcxIngress(port)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			info, err := p.prog.Info()
			if err != nil {
				t.Fatal(err)
			}
			id, _ := info.ID()
			ids["tcx:"+p.name] = id
			parts = append(parts, "tcx:"+p.name)
		}
		closeTCX(ps)
	}
	bfs := ingressFilters(t, port)
	sort.Slice(bfs, func(i, j int) bool { return bfs[i].Priority < bfs[j].Priority })
	for _, bf := range bfs {
		ids[bf.Name] = ebpf.ProgramID(bf.Id)
		parts = append(parts, fmt.Sprintf("%s@%d", bf.Name, bf.Priority))
	}
	return strings.Join(parts, " "), ids
}

// ingressFilters returns the bpf filters on the port's tc ingress, failing on any other.
func ingressFilters(t *testing.T, port int) []*netlink.BpfFilter {
	t.Helper()
	fs, err := listFilters(&netlink.Handle{}, port, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		t.Fatal(err)
	}
	var bfs []*netlink.BpfFilter
	for _, f := range fs {
		bf, ok := f.(*netlink.BpfFilter)
		if !ok {
			t.Fatalf("unexpected filter %v on port %d", f, port)
		}
		bfs = append(bfs, bf)
	}
	return bfs
}

// makeLegacy gives the port a shortbridge filter at priority 1, where trellis put it before
// impairments existed (and before tcx), in place of its shortbridge.
func makeLegacy(t *testing.T, port, peer int) {
	t.Helper()
	if err := AttachShortbridgeOn(HookClsact, port, peer, false); err != nil {
		t.Fatal(err)
	}
	var sb *netlink.BpfFilter
	for _, bf := range ingressFilters(t, port) {
		if bf.Name == shortbridgeFilterName {
			sb = bf
		}
	}
	if sb == nil {
		t.Fatalf("no %s filter on port %d", shortbridgeFilterName, port)
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(sb.Id))
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	legacy := *sb
	legacy.Priority = legacyForwardFilterPriority
	legacy.Fd = prog.FD()
	if err := netlink.FilterAdd(&legacy); err != nil {
		t.Fatal(err)
	}
	if err := netlink.FilterDel(sb); err != nil {
		t.Fatal(err)
	}
}

// TestImpairWithShortbridge checks, on each hook the kernel has, that the impairment runs
// before the shortbridge, stays in front of it when the shortbridge is replaced live, and
// moves a forwarding filter of an old trellis out of its way.
func TestImpairWithShortbridge(t *testing.T) {
	testkit.RequireRoot(t)
	for _, hook := range testHooks(t) {
		t.Run(string(hook), func(t *testing.T) {
			useHook(t, hook)
			impairWithShortbridge(t, hook)
		})
	}
}

func impairWithShortbridge(t *testing.T, hook Hook) {
	l := impairedLink(t)
	sbKey, imKey := "tcx:"+shortbridgeProgName, "tcx:"+impairProgName
	want := imKey + " " + sbKey
	// On an old port, the impairment goes in front of the legacy filter, on tcx or at
	// priority 1 (the filter moved to 2).
	wantLegacy, legacyKey := imKey+" "+shortbridgeFilterName+"@1", shortbridgeFilterName
	if hook == HookClsact {
		sbKey, imKey = shortbridgeFilterName, impairFilterName
		want = impairFilterName + "@1 " + shortbridgeFilterName + "@2"
		wantLegacy = want
	}
	ping := func(what string) {
		t.Helper()
		if err := icmpEcho(l.a, l.b.addr, 2*time.Second); err != nil {
			t.Fatalf("%s: ping A->B: %v", what, err)
		}
	}

	impairA(t, l, Impairment{Duplicate: 50})
	layout, ids := ingressLayout(t, l.a.port)
	if layout != want {
		t.Fatalf("port A ingress: %s, want %s", layout, want)
	}
	ping("impaired")

	// Duplicates go through the shaper on the far port, like originals.
	shaper := addShaper(t, l.b.port)
	counts := seqFrames(t, l.a, l.b, 2000)
	shaped := qdiscPackets(t, shaper)
	var delivered uint64
	for _, c := range counts {
		delivered += uint64(c)
	}
	if extra := extraOf(counts); !within(extra, 50, 4) || shaped < delivered {
		t.Errorf("duplicates %.2f%% (want 50 ± 4 %%); the shaper passed %d frames, %d arrived", extra, shaped, delivered)
	}
	if err := netlink.QdiscDel(shaper); err != nil {
		t.Fatal(err)
	}

	// The shortbridge is still replaced in place, in front of nothing but
	// behind the impairment, whose program stays.
	sbID, imID := ids[sbKey], ids[imKey]
	if err := AttachShortbridge(cfg, l.a.port, l.b.port, true); err != nil {
		t.Fatal(err)
	}
	layout, ids = ingressLayout(t, l.a.port)
	if layout != want || ids[sbKey] == sbID || ids[imKey] != imID {
		t.Fatalf("after replacing the shortbridge: %s (sb %d -> %d, impair %d -> %d), want %s, a new sb, the same impair",
			layout, sbID, ids[sbKey], imID, ids[imKey], want)
	}
	l.progIDs = append(l.progIDs, ids[sbKey])
	ping("after replacing the shortbridge")
	// Duplicates cross the new forwarding program too.
	if extra := extraOf(seqFrames(t, l.a, l.b, 2000)); !within(extra, 50, 4) {
		t.Errorf("duplicates %.2f%% through the new shortbridge, want 50 ± 4 %%", extra)
	}

	// A port set up before impairments existed: SetImpairment puts the impairment in front of
	// its shortbridge (the same program).
	makeLegacy(t, l.b.port, l.a.port)
	_, ids = ingressLayout(t, l.b.port)
	legacyID := ids[legacyKey]
	l.progIDs = append(l.progIDs, legacyID)
	if err := SetImpairment(cfg, l.b.port, Impairment{Loss: 1}); err != nil {
		t.Fatal(err)
	}
	layout, ids = ingressLayout(t, l.b.port)
	if layout != wantLegacy || ids[legacyKey] != legacyID {
		t.Fatalf("port B after SetImpairment: %s (sb %d, was %d), want %s with the same sb", layout, ids[legacyKey], legacyID, wantLegacy)
	}
	l.progIDs = append(l.progIDs, ids[imKey])
	// Loss 1 % on B's port: one echo (or its ARP) is lost once in about 50 runs, so up to three.
	var err error
	for try := 0; try < 3; try++ {
		if err = icmpEcho(l.b, l.a.addr, 2*time.Second); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("ping B->A after the move (3 tries): %v", err)
	}

	// And AttachShortbridge on such a port leaves one shortbridge.
	if err := SetImpairment(cfg, l.b.port, Impairment{}); err != nil {
		t.Fatal(err)
	}
	makeLegacy(t, l.b.port, l.a.port)
	if err := AttachShortbridge(cfg, l.b.port, l.a.port, false); err != nil {
		t.Fatal(err)
	}
	wantOne := sbKey
	if hook == HookClsact {
		wantOne = shortbridgeFilterName + "@2"
	}
	if layout, _ := ingressLayout(t, l.b.port); layout != wantOne {
		t.Fatalf("port B after AttachShortbridge on a legacy port: %s, want %s", layout, wantOne)
	}
	if err := icmpEcho(l.b, l.a.addr, 2*time.Second); err != nil {
		t.Fatalf("ping B->A after reattaching: %v", err)
	}
}

// TestImpairLANPort: on a port with no forwarding filter (a LAN port, whose
// frames the bridge takes), the impairment passes frames on to the bridge.
func TestImpairLANPort(t *testing.T) {
	testkit.RequireRoot(t)
	l := setupTestLink(t)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("tdpbr%d", os.Getpid())}}
	if err := netlink.LinkAdd(br); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netlink.LinkDel(br); err != nil {
			t.Errorf("deleting bridge: %v", err)
		}
	})
	for _, port := range []int{l.a.port, l.b.port} {
		link, err := netlink.LinkByIndex(port)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetMaster(link, br); err != nil {
			t.Fatal(err)
		}
	}
	if err := netlink.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}
	impairA(t, l, Impairment{Loss: 20})
	want := impairFilterName + "@1"
	if hook, _ := cfg.Hook(); hook == HookTCX {
		want = "tcx:" + impairProgName
	}
	if layout, _ := ingressLayout(t, l.a.port); layout != want {
		t.Fatalf("LAN port ingress: %s, want %s alone", layout, want)
	}
	loss, _ := lossOf(seqFrames(t, l.a, l.b, 5000))
	t.Logf("loss through the bridge: %.2f%%", loss)
	if !within(loss, 20, 2.5) {
		t.Errorf("loss through the bridge %.2f%%, want 20 ± 2.5 %%", loss)
	}
	if err := SetImpairment(cfg, l.a.port, Impairment{}); err != nil {
		t.Fatal(err)
	}
	if layout, _ := ingressLayout(t, l.a.port); layout != "" {
		t.Errorf("LAN port ingress after removal: %s, want nothing", layout)
	}
}

// addShaper puts a token bucket filter, fast enough to hold nothing back,
// as the root qdisc of the port.
func addShaper(t *testing.T, port int) *netlink.Tbf {
	t.Helper()
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: port, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       10_000_000_000 / 8,
		Limit:      1 << 20,
		Buffer:     1 << 20,
	}
	if err := netlink.QdiscAdd(q); err != nil {
		t.Fatal(err)
	}
	return q
}

// qdiscPackets returns the number of packets the qdisc has sent.
func qdiscPackets(t *testing.T, q netlink.Qdisc) uint64 {
	t.Helper()
	link, err := netlink.LinkByIndex(q.Attrs().LinkIndex)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := netlink.QdiscList(link)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range qs {
		if x.Attrs().Handle == q.Attrs().Handle && x.Attrs().Statistics != nil {
			return uint64(x.Attrs().Statistics.Basic.Packets)
		}
	}
	t.Fatalf("qdisc %x not found on port %d", q.Attrs().Handle, q.Attrs().LinkIndex)
	return 0
}
