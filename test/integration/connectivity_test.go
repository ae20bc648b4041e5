//go:build integration

package integration

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// frameEtherType is the IEEE 802 local experimental ethertype 1: a frame no IP stack handles.
const frameEtherType = 0x88b5

// recvFrameScript waits for one frame of ethertype 0x88b5 whose payload starts with a magic,
// on one interface, and prints it as JSON. It prints "ready" once its socket is bound, and
// "timeout" (exit 1) if nothing comes. Arguments: IFNAME TIMEOUT_SECONDS MAGIC_HEX.
const recvFrameScript = `
import json, socket, sys
ifname, timeout, magic = sys.argv[1], float(sys.argv[2]), bytes.fromhex(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5))
s.bind((ifname, 0))
s.settimeout(timeout)
print("ready", flush=True)
try:
    while True:
        data = s.recv(65535)
        if data[12:14] == b"\x88\xb5" and data[14:14 + len(magic)] == magic:
            print(json.dumps({"dst": data[0:6].hex(), "src": data[6:12].hex(), "payload": data[14:].hex()}), flush=True)
            sys.exit(0)
except socket.timeout:
    print("timeout", flush=True)
    sys.exit(1)
`

// sendFrameScript sends COUNT frames of ethertype 0x88b5 out of an interface, 50 ms apart, and
// prints the source MAC. Arguments: IFNAME DST_MAC_HEX PAYLOAD_HEX COUNT.
const sendFrameScript = `
import socket, sys, time
ifname, dst, payload, count = sys.argv[1], bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
src = s.getsockname()[4]
frame = dst + src + b"\x88\xb5" + payload
frame += b"\0" * max(0, 60 - len(frame))
for i in range(count):
    for attempt in range(20):  # a busy machine's full input queue refuses a frame: retry
        try:
            s.send(frame)
            break
        except OSError as e:
            if e.errno != 105:  # ENOBUFS
                raise
            time.sleep(0.01)
    time.sleep(0.05)
print(src.hex())
`

type receivedFrame struct {
	Dst     string `json:"dst"`
	Src     string `json:"src"`
	Payload string `json:"payload"`
}

// frameReceiver is recvFrameScript running in a node.
type frameReceiver struct {
	bg    *bgCmd
	where string
}

// listenFrame starts a receiver in a node and returns once its socket is bound.
func listenFrame(t *testing.T, state, network, node, ifname string, magic []byte, timeout time.Duration) *frameReceiver {
	t.Helper()
	// Under emulation the frame's sender (trellis exec, python) starts seconds later than here.
	timeout = time.Duration(float64(timeout) * timeScale())
	bg := startIn(t, state, network, node, "python3", "-c", recvFrameScript, ifname, fmt.Sprint(timeout.Seconds()), hex.EncodeToString(magic))
	where := network + "/" + node + ":" + ifname
	if line, ok := bg.waitLine(15 * time.Second); !ok || line != "ready" {
		err := bg.wait(time.Second)
		t.Fatalf("frame receiver in %s did not start (first line %q, %v):\n%s%s", where, line, err, bg.stdout, bg.stderr)
	}
	return &frameReceiver{bg: bg, where: where}
}

// result waits for the receiver; it returns the frame, or nil if none came in time.
func (r *frameReceiver) result(t *testing.T) *receivedFrame {
	t.Helper()
	err := r.bg.wait(time.Minute)
	out := strings.TrimSpace(r.bg.stdout.String())
	lines := strings.Split(out, "\n")
	last := lines[len(lines)-1]
	if exitCode(err) == 1 && last == "timeout" {
		return nil
	}
	if err != nil {
		t.Fatalf("frame receiver in %s: %v\n%s%s", r.where, err, r.bg.stdout, r.bg.stderr)
	}
	var f receivedFrame
	if err := json.Unmarshal([]byte(last), &f); err != nil {
		t.Fatalf("frame receiver in %s printed %q: %v", r.where, out, err)
	}
	return &f
}

// sendFrame sends count frames from a node and returns the source MAC, as hex.
func sendFrame(t *testing.T, state, network, node, ifname, dstMAC string, payload []byte, count int) string {
	t.Helper()
	out := mustExec(t, state, network, node, "python3", "-c", sendFrameScript, ifname, macHex(dstMAC), hex.EncodeToString(payload), fmt.Sprint(count))
	return strings.TrimSpace(out)
}

func macHex(mac string) string { return strings.ToLower(strings.ReplaceAll(mac, ":", "")) }

// checkFrameCrosses sends a non-IP frame from one interface to another and checks that it
// arrives whole.
func checkFrameCrosses(t *testing.T, state, network, from, fromIf, to, toIf string) {
	t.Helper()
	info := inspect(t, state, network)
	dst := info.iface(t, to, toIf).MAC
	src := info.iface(t, from, fromIf).MAC
	payload := []byte("trellis-it-" + nonce() + "-" + from + "-to-" + to)
	r := listenFrame(t, state, network, to, toIf, payload, 5*time.Second)
	sent := sendFrame(t, state, network, from, fromIf, dst, payload, 3)
	if sent != macHex(src) {
		t.Errorf("the sender's socket has MAC %s, inspect says %s", sent, src)
	}
	f := r.result(t)
	if f == nil {
		t.Fatalf("no ethertype %#04x frame from %s:%s reached %s:%s", frameEtherType, from, fromIf, to, toIf)
	}
	if f.Src != macHex(src) || f.Dst != macHex(dst) {
		t.Errorf("frame arrived with src %s dst %s, want src %s dst %s", f.Src, f.Dst, macHex(src), macHex(dst))
	}
	got, _ := hex.DecodeString(f.Payload)
	if !strings.HasPrefix(string(got), string(payload)) || strings.Trim(string(got[len(payload):]), "\x00") != "" {
		t.Errorf("frame payload %q, want %q (and zero padding)", got, payload)
	}
}

// checkARP flushes a node's neighbour table, pings, and checks that the peer's MAC was learnt.
func checkARP(t *testing.T, state, network, from, ifname, addr, to string) {
	t.Helper()
	mustExec(t, state, network, from, "ip", "neigh", "flush", "dev", ifname)
	ping(t, state, network, from, addr)
	want := strings.ToLower(inspect(t, state, network).iface(t, to, ifname).MAC)
	out := mustExec(t, state, network, from, "ip", "-4", "neigh", "show", "dev", ifname)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == addr && f[1] == "lladdr" && strings.ToLower(f[2]) == want {
			return
		}
	}
	t.Errorf("no neighbour entry %s lladdr %s in %s after a ping; ip neigh:\n%s", addr, want, from, out)
}

func TestShortbridgeConnectivity(t *testing.T) {
	e := start(t)
	path := writeTopo(t, `name: sbconn
nodes:
  a:
    addresses:
      eth1: [10.0.0.1/24, fd00::1/64]
  b:
    addresses:
      eth1: [10.0.0.2/24, fd00::2/64]
links:
  - endpoints: [a:eth1, b:eth1]
    connector: shortbridge
`)
	mustTrellis(t, e.state, "up", path)
	if c := inspect(t, e.state, "sbconn").link(t, "a:eth1--b:eth1").Connector; c != "shortbridge" {
		t.Fatalf("link1 has connector %q, want shortbridge", c)
	}
	t.Run("ipv4", func(t *testing.T) {
		ping(t, e.state, "sbconn", "a", "10.0.0.2")
		ping(t, e.state, "sbconn", "b", "10.0.0.1")
	})
	t.Run("ipv6", func(t *testing.T) {
		ping(t, e.state, "sbconn", "a", "fd00::2")
		ping(t, e.state, "sbconn", "b", "fd00::1")
	})
	t.Run("arp", func(t *testing.T) { checkARP(t, e.state, "sbconn", "a", "eth1", "10.0.0.2", "b") })
	t.Run("non-ip frame", func(t *testing.T) {
		checkFrameCrosses(t, e.state, "sbconn", "a", "eth1", "b", "eth1")
		checkFrameCrosses(t, e.state, "sbconn", "b", "eth1", "a", "eth1")
	})
	mustTrellis(t, e.state, "down", "sbconn")
	e.assertClean()
}

// lanTopo is a LAN of the named connector between members (of a, b, c and d; the others are
// nodes without an interface on it), each member with an IPv4 and an IPv6 address.
func lanTopo(name, connector string, members ...string) string {
	var nodes, eps []string
	for i, n := range []string{"a", "b", "c", "d"} {
		if !slices.Contains(members, n) {
			nodes = append(nodes, "  "+n+": {}\n")
			continue
		}
		nodes = append(nodes, fmt.Sprintf("  %s:\n    addresses:\n      eth1: [10.0.0.%d/24, fd00::%d/64]\n", n, i+1, i+1))
		eps = append(eps, n+":eth1")
	}
	return fmt.Sprintf("name: %s\nnodes:\n%slinks:\n  - name: lan\n    endpoints: [%s]\n    connector: %s\n",
		name, strings.Join(nodes, ""), strings.Join(eps, ", "), connector)
}

// TestLANConnectivity checks both LAN connectors, the eBPF LAN and the Linux bridge, as a switch:
// IPv4, IPv6 (neighbour discovery), ARP, non-IP frames, broadcast to every member, learnt
// unicast to its member alone, a MAC address moving to another member, and members leaving and
// joining the running LAN. (The forwarding table's limit and ageing are checked on the data
// plane: internal/dataplane, TestLAN.)
func TestLANConnectivity(t *testing.T) {
	for _, connector := range []string{"lan", "bridge"} {
		t.Run(connector, func(t *testing.T) {
			e := start(t)
			name := "conn" + connector
			path := writeTopo(t, lanTopo(name, connector, "a", "b", "c"))
			mustTrellis(t, e.state, "up", path)
			l := inspect(t, e.state, name).link(t, "lan")
			if l.Connector != connector || (connector == "lan") != (l.Bridge == "") {
				t.Fatalf("link lan has connector %q and bridge %q, want %s (with a bridge device only for bridge)", l.Connector, l.Bridge, connector)
			}
			if connector == "bridge" {
				checkNoBridgeNetfilter(t, l.Bridge)
			}
			checkLAN(t, e.state, name)
			t.Run("mac move", func(t *testing.T) { checkMACMove(t, e.state, name) })
			t.Run("members leave and join", func(t *testing.T) {
				rewriteTopo(t, path, lanTopo(name, connector, "a", "b", "c", "d"))
				mustTrellis(t, e.state, "up", path)
				ping(t, e.state, name, "d", "10.0.0.1")
				rewriteTopo(t, path, lanTopo(name, connector, "a", "b", "d"))
				if out := mustTrellis(t, e.state, "up", path); !strings.Contains(out, "member c:eth1 removed") {
					t.Errorf("up without c said %q", out)
				}
				if err := tryPing(t, e.state, name, "a", "10.0.0.3"); err == nil {
					t.Error("a reached c after c left the LAN")
				}
				ping(t, e.state, name, "a", "fd00::4")
				rewriteTopo(t, path, lanTopo(name, connector, "a", "b", "c", "d"))
				mustTrellis(t, e.state, "up", path)
				ping(t, e.state, name, "a", "10.0.0.3")
				checkBroadcast(t, e.state, name, "b", "a", "c", "d")
			})
			mustTrellis(t, e.state, "down", name)
			e.assertClean()
		})
	}
}

// checkNoBridgeNetfilter checks that a bridge's own bridge-netfilter options are off.
func checkNoBridgeNetfilter(t *testing.T, bridge string) {
	t.Helper()
	read := os.ReadFile
	if args := portNSArgs(bridge); args != nil { // in its network's port namespace: its /sys
		read = func(path string) ([]byte, error) {
			return exec.Command("ip", "netns", "exec", args[1], "cat", path).Output()
		}
	}
	for _, opt := range []string{"nf_call_iptables", "nf_call_ip6tables", "nf_call_arptables"} {
		data, err := read("/sys/class/net/" + bridge + "/bridge/" + opt)
		if err != nil {
			t.Errorf("bridge %s: %v", bridge, err)
		} else if v := strings.TrimSpace(string(data)); v != "0" {
			t.Errorf("bridge %s: %s is %s, want 0", bridge, opt, v)
		}
	}
}

// checkLAN checks a running LAN of a, b and c.
func checkLAN(t *testing.T, state, name string) {
	t.Run("ipv4", func(t *testing.T) {
		ping(t, state, name, "a", "10.0.0.2")
		ping(t, state, name, "a", "10.0.0.3")
		ping(t, state, name, "c", "10.0.0.2")
	})
	t.Run("ipv6", func(t *testing.T) {
		ping(t, state, name, "a", "fd00::2")
		ping(t, state, name, "a", "fd00::3")
		ping(t, state, name, "c", "fd00::2")
	})
	t.Run("arp", func(t *testing.T) {
		checkARP(t, state, name, "a", "eth1", "10.0.0.2", "b")
		checkARP(t, state, name, "b", "eth1", "10.0.0.3", "c")
	})
	t.Run("non-ip frame", func(t *testing.T) {
		checkFrameCrosses(t, state, name, "a", "eth1", "c", "eth1")
		checkFrameCrosses(t, state, name, "c", "eth1", "b", "eth1")
	})
	t.Run("broadcast", func(t *testing.T) { checkBroadcast(t, state, name, "a", "b", "c") })
	t.Run("learnt unicast", func(t *testing.T) {
		// a and b have just talked: each is learnt, and a frame between them is not flooded.
		ping(t, state, name, "a", "10.0.0.2")
		info := inspect(t, state, name)
		payload := []byte("trellis-it-unicast-" + nonce())
		rb := listenFrame(t, state, name, "b", "eth1", payload, 3*time.Second)
		rc := listenFrame(t, state, name, "c", "eth1", payload, 3*time.Second)
		sendFrame(t, state, name, "a", "eth1", info.iface(t, "b", "eth1").MAC, payload, 3)
		if rb.result(t) == nil {
			t.Error("a frame from a to b's MAC did not reach b")
		}
		if f := rc.result(t); f != nil {
			t.Errorf("a frame from a to b's learnt MAC was flooded to c: %+v", f)
		}
	})
}

// checkBroadcast sends a broadcast non-IP frame from one node and checks that each of to
// receives it.
func checkBroadcast(t *testing.T, state, name, from string, to ...string) {
	t.Helper()
	payload := []byte("trellis-it-broadcast-" + nonce())
	var rs []*frameReceiver
	for _, n := range to {
		rs = append(rs, listenFrame(t, state, name, n, "eth1", payload, 3*time.Second))
	}
	sendFrame(t, state, name, from, "eth1", "ff:ff:ff:ff:ff:ff", payload, 3)
	for i, r := range rs {
		if r.result(t) == nil {
			t.Errorf("a broadcast from %s did not reach %s", from, to[i])
		}
	}
}

// checkMACMove moves b's MAC and address to c (as when a virtual machine migrates): b's
// interface goes down, c's takes b's MAC and IPv4 address, and once c has sent a frame a
// reaches the address through c, its ARP entry unchanged. Then everything is put back.
func checkMACMove(t *testing.T, state, name string) {
	info := inspect(t, state, name)
	macB, macC := info.iface(t, "b", "eth1").MAC, info.iface(t, "c", "eth1").MAC
	ping(t, state, name, "a", "10.0.0.2") // a's ARP entry and the LAN's table: b's MAC on b
	mustExec(t, state, name, "b", "ip", "link", "set", "eth1", "down")
	mustExec(t, state, name, "c", "ip", "link", "set", "eth1", "address", macB)
	mustExec(t, state, name, "c", "ip", "addr", "add", "10.0.0.12/24", "dev", "eth1")
	mustExec(t, state, name, "c", "ip", "addr", "add", "10.0.0.2/24", "dev", "eth1")
	// c speaks from b's MAC: the LAN learns it on c's port.
	ping(t, state, name, "c", "10.0.0.1")
	ping(t, state, name, "a", "10.0.0.2")
	if out := mustExec(t, state, name, "a", "ip", "-4", "neigh", "show", "10.0.0.2"); !strings.Contains(strings.ToLower(out), strings.ToLower(macB)) {
		t.Errorf("a's neighbour entry for 10.0.0.2 is %q, want b's MAC %s (the frames followed the MAC to c)", out, macB)
	}
	mustExec(t, state, name, "c", "ip", "addr", "del", "10.0.0.2/24", "dev", "eth1")
	mustExec(t, state, name, "c", "ip", "addr", "del", "10.0.0.12/24", "dev", "eth1")
	mustExec(t, state, name, "c", "ip", "link", "set", "eth1", "address", macC)
	mustExec(t, state, name, "b", "ip", "link", "set", "eth1", "up")
	pingEventually(t, state, name, "b", "10.0.0.1") // and the MAC moves back to b
	pingEventually(t, state, name, "a", "10.0.0.3")
}

// isoTopo is the network of TestIsolation; only the name differs between the two copies.
const isoTopo = `name: %s
nodes:
  a:
    addresses:
      eth1: [10.0.0.1/24, fd00::1/64]
  b:
    addresses:
      eth1: [10.0.0.2/24, fd00::2/64]
links:
  - endpoints: [a:eth1, b:eth1]
`

func TestIsolation(t *testing.T) {
	e := start(t)
	nets := []string{"isoa", "isob"}
	for _, n := range nets {
		mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(isoTopo, n)))
	}
	info := map[string]*netInfo{}
	for _, n := range nets {
		for _, node := range []string{"a", "b"} {
			if h := strings.TrimSpace(mustExec(t, e.state, n, node, "hostname")); h != node {
				t.Errorf("hostname of %s/%s is %q", n, node, h)
			}
		}
		info[n] = inspect(t, e.state, n)
	}
	A, B := info["isoa"], info["isob"]
	if A.NetID == B.NetID {
		t.Errorf("both networks have id %s", A.NetID)
	}
	for _, node := range []string{"a", "b"} {
		if pa, pb := A.node(t, node).PID, B.node(t, node).PID; pa == pb || pa == 0 || pb == 0 {
			t.Errorf("node %s: pid %d in isoa, %d in isob; want two different running nodes", node, pa, pb)
		}
		if ma, mb := A.iface(t, node, "eth1").MAC, B.iface(t, node, "eth1").MAC; ma == mb {
			t.Errorf("node %s: eth1 has MAC %s in both networks", node, ma)
		}
		if ia, ib := inode(t, e.state, "isoa", node), inode(t, e.state, "isob", node); ia == ib {
			t.Errorf("node %s: both networks' nodes are in network namespace %s", node, ia)
		}
	}
	// The link names no connector: one veth pair in each network, no port in the substrate
	// for the two to share.
	for _, info := range []*netInfo{A, B} {
		if l := info.link(t, "a:eth1--b:eth1"); l.Connector != "veth" || l.Endpoints[0].Port != "" || l.Endpoints[1].Port != "" {
			t.Errorf("network %s: link a:eth1--b:eth1 has connector %s, ports %q and %q; want veth, no port", info.Name, l.Connector, l.Endpoints[0].Port, l.Endpoints[1].Port)
		}
	}

	// Traffic in isoa must not reach isob: wait until isob is quiet (IPv6 link-local start-up
	// chatter), then send in isoa and check that isob's counters and a listener in isob saw
	// nothing, while the same listener in isoa did. isob has had no traffic of its own yet, so
	// that no neighbour re-probing (5 s after a use) moves its counters; it is pinged after.
	quietB := waitQuiet(t, e.state, "isob")
	payload := []byte("trellis-it-isolation-" + nonce())
	rA := listenFrame(t, e.state, "isoa", "b", "eth1", payload, 3*time.Second)
	rB := listenFrame(t, e.state, "isob", "b", "eth1", payload, 3*time.Second)
	beforeA := counters(inspect(t, e.state, "isoa"))
	sendFrame(t, e.state, "isoa", "a", "eth1", "ff:ff:ff:ff:ff:ff", payload, 5)
	mustExec(t, e.state, "isoa", "a", "ping", "-c", "50", "-i", "0.01", "-W", "2", "10.0.0.2")
	mustExec(t, e.state, "isoa", "a", "ping", "-6", "-c", "20", "-i", "0.01", "-W", "2", "fd00::2")
	// Nodes ignore broadcast echo requests: only the requests count, not the exit code.
	execIn(t, e.state, "isoa", "a", "ping", "-b", "-c", "5", "-i", "0.01", "-W", "1", "10.0.0.255")
	if f := rA.result(t); f == nil {
		t.Errorf("the broadcast frame sent in isoa did not reach isoa's b")
	}
	if f := rB.result(t); f != nil {
		t.Errorf("a frame sent in isoa reached isob's b: %+v", f)
	}
	afterA := counters(inspect(t, e.state, "isoa"))
	afterB := counters(inspect(t, e.state, "isob"))
	if got := afterA["b:eth1 rx"] - beforeA["b:eth1 rx"]; got < 75 {
		t.Errorf("isoa's b received %d packets during the test traffic, want at least 75", got)
	}
	for k, v := range afterB {
		if v != quietB[k] {
			t.Errorf("isob counter %s went from %d to %d while only isoa had traffic", k, quietB[k], v)
		}
	}
	t.Logf("isoa b:eth1 received %d packets; isob counters unchanged: %v", afterA["b:eth1 rx"]-beforeA["b:eth1 rx"], afterB)
	for _, n := range nets {
		ping(t, e.state, n, "a", "10.0.0.2")
		ping(t, e.state, n, "b", "fd00::1")
	}

	mustTrellis(t, e.state, "down", "isoa", "isob")
	e.assertClean()
}

// inode returns the network namespace a node's processes are in, as `trellis exec` sees it.
func inode(t *testing.T, state, network, node string) string {
	t.Helper()
	return strings.TrimSpace(mustExec(t, state, network, node, "readlink", "/proc/self/ns/net"))
}

// counters returns a network's endpoint packet counters by "node:ifname rx|tx".
func counters(info *netInfo) map[string]uint64 {
	out := map[string]uint64{}
	for _, l := range info.Links {
		for _, ep := range l.Endpoints {
			out[ep.Node+":"+ep.Interface+" rx"] = ep.RxPackets
			out[ep.Node+":"+ep.Interface+" tx"] = ep.TxPackets
		}
	}
	return out
}

// waitQuiet waits until a network's counters stay the same for 3 s, and returns them.
func waitQuiet(t *testing.T, state, network string) map[string]uint64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := counters(inspect(t, state, network))
	since := time.Now()
	for time.Since(since) < 3*time.Second {
		if time.Now().After(deadline) {
			t.Fatalf("network %s did not go quiet: %v", network, last)
		}
		time.Sleep(250 * time.Millisecond)
		if c := counters(inspect(t, state, network)); !mapsEqual(c, last) {
			last, since = c, time.Now()
		}
	}
	return last
}
