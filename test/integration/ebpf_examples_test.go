//go:build integration

package integration

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// udpSender is a Python program run in a node: from each source port of SPORTS (FIRST-LAST),
// one after the other, it sends COUNT datagrams of SIZE bytes (50 if not given) to DST:5000,
// INTERVAL seconds apart, with the TOS byte TOS (0 if not given).
const udpSender = `import socket, sys, time
first, last = (int(p) for p in sys.argv[1].split("-"))
dst, count, interval = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
size = int(sys.argv[5]) if len(sys.argv) > 5 else 50
tos = int(sys.argv[6]) if len(sys.argv) > 6 else 0
for sport in range(first, last + 1):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    s.bind(("", sport))
    for _ in range(count):
        s.sendto(b"x" * size, (dst, 5000))
        if interval:
            time.sleep(interval)
    s.close()
`

// udpArgv is the command that sends count datagrams to dst:5000 from each of the source
// ports first to last.
func udpArgv(dst string, first, last, count int, interval float64) []string {
	return []string{"python3", "-c", udpSender, fmt.Sprintf("%d-%d", first, last), dst, strconv.Itoa(count), fmt.Sprint(interval)}
}

// upExample brings up examples/ebpf/NAME/NAME.yaml (its test needs clang and python3, which
// the nodes run with the machine's files) and returns a function running
// `trellis table NETWORK NODE ARGS...`.
func upExample(t *testing.T, state, name string) func(node string, args ...string) string {
	t.Helper()
	needClang(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is not installed (%v): the examples' tests send and receive with it (Debian: apt-get install python3)", err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mustTrellis(t, state, "up", filepath.Join(root, "examples/ebpf", name, name+".yaml"))
	return func(node string, args ...string) string {
		return mustTrellis(t, state, append([]string{"table", "ebpf-" + name, node}, args...)...)
	}
}

// dumpTable parses `trellis table ... dump`: each entry's value by its key, both in hex.
func dumpTable(t *testing.T, out string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		v, err := hex.DecodeString(f[len(f)-1])
		if len(f) != 2 || err != nil {
			t.Fatalf("dump line %q is not KEY VALUE in hex", l)
		}
		m[f[0]] = v
	}
	return m
}

// flowKey is flowcount.c's struct flow_key in hex.
func flowKey(src, dst string, sport, dport uint16, proto byte) string {
	var b [16]byte
	copy(b[0:4], parseIPv4(src))
	copy(b[4:8], parseIPv4(dst))
	binary.BigEndian.PutUint16(b[8:], sport)
	binary.BigEndian.PutUint16(b[10:], dport)
	b[12] = proto
	return hex.EncodeToString(b[:])
}

func parseIPv4(s string) []byte {
	var b []byte
	for _, p := range strings.Split(s, ".") {
		n, _ := strconv.Atoi(p)
		b = append(b, byte(n))
	}
	return b
}

// TestEbpfFlowCount brings up examples/ebpf/flowcount: s1 is a wire counting each IPv4 flow
// under its 5-tuple. The counts of a UDP flow are read while it runs (some frames counted,
// not yet all), and once it ends they are exactly what was sent: frames and bytes; pings are
// counted in their own flows, one a direction.
func TestEbpfFlowCount(t *testing.T) {
	e := start(t)
	table := upExample(t, e.state, "flowcount")
	// 2 pings of 64 bytes, then 5 of 100, each way: ICMP flows have no ports.
	ping(t, e.state, "ebpf-flowcount", "h1", "10.0.0.2") // the wire carries ARP and IPv4
	mustExec(t, e.state, "ebpf-flowcount", "h1", "ping", "-c", "5", "-i", "0.2", "-s", "100", "10.0.0.2")
	const icmpBytes = 2*(14+20+8+56) + 5*(14+20+8+100)
	checkFlows(t, table("s1", "flows", "dump"),
		flowWant{"ICMP 10.0.0.1 -> 10.0.0.2", flowKey("10.0.0.1", "10.0.0.2", 0, 0, 1), 7, icmpBytes},
		flowWant{"ICMP 10.0.0.2 -> 10.0.0.1", flowKey("10.0.0.2", "10.0.0.1", 0, 0, 1), 7, icmpBytes})

	const frames, frameLen = 20, 14 + 20 + 8 + 50
	udp := flowKey("10.0.0.1", "10.0.0.2", 40000, 5000, 17)
	sender := startIn(t, e.state, "ebpf-flowcount", "h1", udpArgv("10.0.0.2", 40000, 40000, frames, 0.15)...)
	live := -1
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if v, ok := dumpTable(t, table("s1", "flows", "dump"))[udp]; ok {
			live = int(binary.LittleEndian.Uint64(v))
			break
		}
	}
	if err := sender.wait(30 * time.Second); err != nil {
		t.Fatalf("UDP sender: %v\n%s", err, sender.stderr)
	}
	if live <= 0 || live >= frames {
		t.Errorf("the flow's frames read while it ran: %d, want some of the %d (none read: -1)", live, frames)
	}

	// The flow's counts once it ended. (h2's ports unreachable, ICMP, are in flows of their own.)
	checkFlows(t, table("s1", "flows", "dump"), flowWant{"UDP 10.0.0.1:40000 -> 10.0.0.2:5000", udp, frames, frames * frameLen})
	mustTrellis(t, e.state, "down", "ebpf-flowcount")
	e.assertClean()
}

type flowWant struct {
	what          string
	key           string
	frames, bytes uint64
}

// checkFlows checks flowcount.c's counts in a dump of its flows table.
func checkFlows(t *testing.T, dump string, wants ...flowWant) {
	t.Helper()
	flows := dumpTable(t, dump)
	for _, want := range wants {
		v, ok := flows[want.key]
		if !ok || len(v) != 16 {
			t.Errorf("%s: no 16-byte entry %s in the flows table:\n%s", want.what, want.key, dump)
			continue
		}
		if f, b := binary.LittleEndian.Uint64(v), binary.LittleEndian.Uint64(v[8:]); f != want.frames || b != want.bytes {
			t.Errorf("%s: %d frames, %d bytes; want %d, %d", want.what, f, b, want.frames, want.bytes)
		}
	}
}

// TestEbpfECMP brings up examples/ebpf/ecmp: s1 and s2 spread flows over their two links by a
// hash of the 5-tuple, through buckets filled from the CLI. With the buckets empty nothing
// crosses; filled half to each path, one UDP flow's frames all take one path, and eight flows
// from eight source ports take both.
func TestEbpfECMP(t *testing.T) {
	e := start(t)
	const net = "ebpf-ecmp"
	table := upExample(t, e.state, "ecmp")
	if err := tryPing(t, e.state, net, "h1", "10.0.0.2"); err == nil {
		t.Fatal("h1 reaches h2 with the buckets empty")
	}
	for _, s := range []string{"s1", "s2"} {
		for b := 0; b < 8; b++ {
			table(s, "buckets", "set", fmt.Sprintf("%02x000000", b), fmt.Sprintf("%02x000000", 2+b%2))
		}
	}
	mustExec(t, e.state, net, "h1", "ip", "neigh", "flush", "dev", "eth1") // ARP failed meanwhile
	ping(t, e.state, net, "h1", "10.0.0.2")

	// spread returns the IPv4 frames s1 sent out of ports 2 and 3.
	spread := func() (p2, p3 uint64) {
		n := func(port string) uint64 {
			v, err := hex.DecodeString(strings.TrimSpace(table("s1", "spread", "get", port)))
			if err != nil || len(v) != 8 {
				t.Fatalf("s1's spread[%s] is not 8 bytes of hex: %v", port, err)
			}
			return binary.LittleEndian.Uint64(v)
		}
		return n("02000000"), n("03000000")
	}
	a2, a3 := spread()
	mustExec(t, e.state, net, "h1", udpArgv("10.0.0.2", 40000, 40000, 20, 0.01)...)
	b2, b3 := spread()
	if d2, d3 := b2-a2, b3-a3; !(d2 == 20 && d3 == 0 || d2 == 0 && d3 == 20) {
		t.Errorf("one flow of 20 frames went %d out of port 2 and %d out of port 3; want all 20 one way", d2, d3)
	}
	mustExec(t, e.state, net, "h1", udpArgv("10.0.0.2", 40001, 40008, 5, 0.01)...)
	c2, c3 := spread()
	if d2, d3 := c2-b2, c3-b3; d2 == 0 || d3 == 0 || d2+d3 != 40 {
		t.Errorf("8 flows of 5 frames went %d out of port 2 and %d out of port 3; want 40, on both", d2, d3)
	}
	mustTrellis(t, e.state, "down", net)
	e.assertClean()
}

// TestEbpfSrcRoute brings up examples/ebpf/srcroute: a frame from h1 carries its path as a
// stack of ports, which s1 and then s2 or s3 pop. The stack [2, 2] arrives at h2's eth1
// through s2, [3, 2] at its eth2 through s3, each with its stack emptied.
func TestEbpfSrcRoute(t *testing.T) {
	e := start(t)
	const net = "ebpf-srcroute"
	upExample(t, e.state, "srcroute")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "examples/ebpf/srcroute")
	// The scripts go in as text: a node's /tmp is its own, and CI's clone is under /tmp.
	script := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	recv := startIn(t, e.state, net, "h2", "python3", "-c", script("receiver.py"), "2")
	if l, ok := recv.waitLine(20 * time.Second); !ok || l != "ready" {
		t.Fatalf("receiver.py in h2 did not start: %q\n%s", l, recv.stderr)
	}
	for _, path := range [][]string{{"2", "2"}, {"3", "2"}} {
		mustExec(t, e.state, net, "h1", append([]string{"python3", "-c", script("sender.py"), "eth1", "path-" + strings.Join(path, "-")}, path...)...)
	}
	var got []string
	for range 2 {
		l, ok := recv.waitLine(10 * time.Second)
		if !ok {
			break
		}
		got = append(got, l)
	}
	recv.wait(5 * time.Second)
	// interface, depth left, payload
	if want := []string{"eth1 0 path-2-2", "eth2 0 path-3-2"}; !slices.Equal(got, want) {
		t.Errorf("h2 received %q, want %q (stack [2 2] through s2 to eth1, [3 2] through s3 to eth2)", got, want)
	}
	mustTrellis(t, e.state, "down", net)
	e.assertClean()
}

// ecnReceiver is a Python program run in a node: it prints "ready", receives datagrams on
// port 5000 until none came for a second after the first, and prints how many came and how
// many of them had CE in their ECN field.
const ecnReceiver = `import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
s.bind(("", 5000))
print("ready", flush=True)
got = ce = 0
s.settimeout(20)
while True:
    try:
        _, anc, _, _ = s.recvmsg(2048, socket.CMSG_SPACE(1))
    except TimeoutError:
        break
    s.settimeout(1)
    got += 1
    ce += any(l == socket.IPPROTO_IP and t == socket.IP_TOS and d[0] & 3 == 3 for l, t, d in anc)
print(got, ce, flush=True)
`

// TestEbpfECN brings up examples/ebpf/ecn: s1 marks ECN-capable packets CE when its port's
// virtual queue (drained at 100 kB/s) holds more than 10 kB. A slow ECT(0) flow (2 kB/s)
// arrives at h2 unmarked; a fast one (far above 100 kB/s) arrives with CE on many packets, as
// s1's counter says; a fast flow that is not ECN-capable is never marked.
func TestEbpfECN(t *testing.T) {
	e := start(t)
	const net = "ebpf-ecn"
	table := upExample(t, e.state, "ecn")
	table("s1", "vq", "set", "00000000", "a086010000000000.1027000000000000") // 100000 B/s, 10000 B
	ping(t, e.state, net, "h1", "10.0.0.2")
	marked := func() uint64 {
		v, err := hex.DecodeString(strings.TrimSpace(table("s1", "counters", "get", "01000000")))
		if err != nil || len(v) != 8 {
			t.Fatalf("s1's counters[1] is not 8 bytes of hex: %v", err)
		}
		return binary.LittleEndian.Uint64(v)
	}
	for _, tc := range []struct {
		name        string
		count, size int
		interval    float64
		tos         int
		wantCE      bool
	}{
		{"ECT(0) at 2 kB/s", 20, 50, 0.05, 2, false},
		{"not ECN-capable, fast", 150, 1000, 0, 0, false},
		{"ECT(0), fast", 150, 1000, 0, 2, true},
	} {
		recv := startIn(t, e.state, net, "h2", "python3", "-c", ecnReceiver)
		if l, ok := recv.waitLine(20 * time.Second); !ok || l != "ready" {
			t.Fatalf("receiver in h2 did not start: %q\n%s", l, recv.stderr)
		}
		before := marked()
		mustExec(t, e.state, net, "h1", append(udpArgv("10.0.0.2", 40000, 40000, tc.count, tc.interval), strconv.Itoa(tc.size), strconv.Itoa(tc.tos))...)
		l, _ := recv.waitLine(30 * time.Second)
		recv.wait(5 * time.Second)
		var got, ce int
		if _, err := fmt.Sscan(l, &got, &ce); err != nil {
			t.Fatalf("%s: the receiver printed %q: %v\n%s", tc.name, l, err, recv.stderr)
		}
		delta := marked() - before
		t.Logf("%s: %d of %d datagrams sent arrived, %d with CE; s1 marked %d", tc.name, got, tc.count, ce, delta)
		if got == 0 {
			t.Errorf("%s: nothing arrived", tc.name)
		}
		if tc.wantCE && (ce == 0 || delta < uint64(ce)) {
			t.Errorf("%s: %d datagrams arrived with CE, s1 counted %d marked; want some, and as many counted", tc.name, ce, delta)
		}
		if !tc.wantCE && (ce != 0 || delta != 0) {
			t.Errorf("%s: %d datagrams arrived with CE, s1 counted %d marked; want none", tc.name, ce, delta)
		}
	}
	mustTrellis(t, e.state, "down", net)
	e.assertClean()
}
