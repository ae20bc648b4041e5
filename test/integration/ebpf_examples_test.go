//go:build integration

package integration

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// udpSender is a Python program run in a node: it sends COUNT datagrams of 50 bytes from
// source port SPORT to DST:5000, INTERVAL seconds apart.
const udpSender = `import socket, sys, time
sport, dst, count, interval = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("", sport))
for _ in range(count):
    s.sendto(b"x" * 50, (dst, 5000))
    time.sleep(interval)
`

// udpArgv is the command that sends count datagrams from sport to dst:5000.
func udpArgv(dst string, sport, count int, interval float64) []string {
	return []string{"python3", "-c", udpSender, strconv.Itoa(sport), dst, strconv.Itoa(count), fmt.Sprint(interval)}
}

// upExample brings up examples/ebpf/NAME/NAME.yaml and returns a function running
// `trellis table NETWORK NODE ARGS...`.
func upExample(t *testing.T, state, name string) func(node string, args ...string) string {
	t.Helper()
	needClang(t)
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
	sender := startIn(t, e.state, "ebpf-flowcount", "h1", udpArgv("10.0.0.2", 40000, frames, 0.15)...)
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
