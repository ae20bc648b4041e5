//go:build integration

package integration

// A host on the underlay (docs/security.md, "A host on the underlay"): a namespace on the
// simulated machines' switch, with an address of its own, tries what docs/security.md lists
// against a cluster of two machines (agents, etcd, an EGRE and a VXLAN network of tenant t1)
// and against remote engines. One subtest per row of the table.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
	"github.com/trellisnet/trellis/internal/plan"
)

// underlayRig is TestUnderlayHost's cluster of two machines with the stranger on their switch,
// and tenant t1's networks pe (EGRE) and pv (VXLAN), each with node a on m1 and b on m2.
type underlayRig struct {
	m             *machines
	x, xmac       string // the stranger's namespace and MAC
	root          pki.Files
	pe, pv        string // the networks' names on the machines
	macB          string // b's MAC in pe: the inner source of the probes
	m1, m2, xaddr netip.Addr
	cli           func(args ...string)
}

// underlayCluster starts etcd, an agent on each machine and the two networks.
func underlayCluster(t *testing.T) *underlayRig {
	m := machinesUp(t, 2)
	r := &underlayRig{m: m, pe: agent.LocalName("t1", "pe"), pv: agent.LocalName("t1", "pv"),
		m1: netip.MustParseAddr(m.addr(1)), m2: netip.MustParseAddr(m.addr(2)), xaddr: netip.MustParseAddr(strangerAddr)}
	r.x, r.xmac = m.stranger(t)
	mustHostRun(t, "ip", "-n", m.ul, "addr", "add", etcdAddr+"/24", "dev", "ul")
	c := etcdtest.StartWith(t, 1, etcdtest.Options{Host: etcdAddr, Netns: m.ul})
	r.root = c.Root
	k := &clusterOf{m: m, etcd: c, s: cluster.New(c.Client()), agents: make([]*agentProc, 3)}
	registerNetwork(r.pe)
	registerNetwork(r.pv)
	for i := 1; i <= 2; i++ {
		k.agents[i] = machineAgent(t, m, c, i)
	}
	// The files pin nodes to m1 and m2: the placer refuses a machine not registered yet.
	waitFor(t, 15*time.Second, "two machines registered", func() (bool, string) {
		ms, _, err := k.s.Machines(context.Background())
		return err == nil && len(ms) == 2, fmt.Sprint(ms, err, "\n", k.logs())
	})
	ctxFile := writeTopo(t, fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\ntenant: t1\n",
		strings.Join(c.Endpoints, ", "), c.Root.CA, c.Root.Cert, c.Root.Key))
	r.cli = func(args ...string) { m.trellis(t, 1, append([]string{"--cluster", ctxFile}, args...)...) }
	for _, n := range []struct{ name, tunnel string }{{"pe", ""}, {"pv", "tunnel: vxlan\n"}} {
		r.cli("up", writeTopo(t, fmt.Sprintf(underlayPairTopo, n.name, n.tunnel)))
		k.converged(t, n.name, k.generation(t, n.name))
		m.ping(t, 1, agent.LocalName("t1", n.name), "a", "10.0.1.2")
	}
	r.macB = m.inspect(t, 2, r.pe).mac(t, "b", "eth1")
	// The cluster's API, served on m1's underlay address.
	serve := exec.Command("ip", "netns", "exec", m.ns(1), trellisBin, "--state-dir", m.state(1), "--cluster", ctxFile,
		"serve", "-q", "--listen", apiAddr(m), "--tls-cert", c.Root.Cert, "--tls-key", c.Root.Key)
	bg := startBg(t, serve, "trellis serve --cluster on m1")
	waitFor(t, 15*time.Second, "the cluster's API listening on m1", func() (bool, string) {
		out, _ := inStranger(r.x, "python3", "-c", tlsProbeScript, m.addr(1), "7446", c.Root.Cert, c.Root.Key)
		return strings.HasPrefix(out, "answered"), out + bg.stderr.String()
	})
	return r
}

// apiAddr is where underlayCluster serves the cluster's API: m1's underlay address, port 7446.
func apiAddr(m *machines) string { return m.addr(1) + ":7446" }

func TestUnderlayHost(t *testing.T) {
	r := underlayCluster(t)
	for _, row := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"EGRE from its own address with the link's key", r.egreOwnAddress},
		{"EGRE with m2's address and the key of the names", r.egreNamesKey},
		{"VXLAN from its own address with the link's VNI", r.vxlanOwnAddress},
		{"VXLAN from its own address, with an IP option, to a broadcast MAC, or in fragments", r.vxlanDressed},
		{"agent endpoint and API without a certificate of the cluster", r.agentEndpoint},
		{"every TCP port of the machines", r.tcpPorts},
		{"route through a machine to a node", r.routeThrough},
	} {
		t.Run(row.name, row.f)
	}
	r.cli("down", "pe", "pv")
}

func (r *underlayRig) egreOwnAddress(t *testing.T) {
	key := r.m.inspect(t, 1, r.pe).link(t, "ab").Tunnels[0].Key // as sniffed on the wire
	before := r.m.inspect(t, 1, r.pe).egre(t, "WrongSource")
	if r.m.egreReaches(t, r.x, r.xmac, r.xaddr, key, r.pe, r.macB) {
		t.Errorf("an EGRE packet from %v with the link's key %#08x reached node a", r.xaddr, key)
	}
	if after := r.m.inspect(t, 1, r.pe).egre(t, "WrongSource"); after < before+5 {
		t.Errorf("m1 counted %d packets from a wrong source, want 5 more than %d", after, before)
	}
}

func (r *underlayRig) egreNamesKey(t *testing.T) {
	key := r.m.inspect(t, 1, r.pe).link(t, "ab").Tunnels[0].Key
	guess := plan.TunnelKey(nil, r.pe, "ab")
	if key == guess {
		t.Errorf("link ab's key %#08x is the one its names give", key)
	}
	if r.m.egreReaches(t, r.x, r.xmac, r.m2, guess, r.pe, r.macB) {
		t.Errorf("an EGRE packet from m2's address %v with the key %#08x of the names reached node a", r.m2, guess)
	}
	// The residual risk, and the control of the injection: with the key as sniffed on the wire
	// and m2's address, the frame is m2's to the decapsulation program.
	if !r.m.egreReaches(t, r.x, r.xmac, r.m2, key, r.pe, r.macB) {
		t.Errorf("an EGRE packet from m2's address with the link's key did not reach node a: the injection does not work")
	}
}

func (r *underlayRig) vxlanOwnAddress(t *testing.T) {
	m := r.m
	tun := m.inspect(t, 1, r.pv).link(t, "ab").Tunnels[0]
	vni := tun.Key & 0xffffff
	// vxlan sends the packet from namespace ns and tells whether its inner frame, with b's MAC
	// as source, reached node a.
	vxlan := func(ns string) bool {
		magic := []byte("trellis-it-underlay-vx-" + nonce())
		rcv := m.listenFrame(t, 1, r.pv, "a", "eth1", magic, 3*time.Second)
		sendVXLAN(t, ns, m.addr(1), "4789", vxlanPacket(t, vni, r.macB, magic))
		return rcv.result(t) != nil
	}
	before := m.inspect(t, 1, r.pv).EGRE["VXLANRefused"]
	if vxlan(r.x) {
		t.Errorf("a VXLAN packet from %v with the link's VNI %d reached node a", r.xaddr, vni)
	}
	if after := m.inspect(t, 1, r.pv).EGRE["VXLANRefused"]; after < before+5 {
		t.Errorf("m1 counted %d refused VXLAN packets, want 5 more than %d", after, before)
	}
	if fdb, err := m.inNS(1, "bridge", "fdb", "show", "dev", tun.Device); err != nil || strings.Contains(fdb, strangerAddr) {
		t.Errorf("m1's VXLAN device learnt the stranger's address (%v):\n%s", err, fdb)
	}
	if !vxlan(m.ns(2)) {
		t.Errorf("the same VXLAN packet sent from m2 did not reach node a: the injection does not work")
	}
	m.ping(t, 1, r.pv, "a", "10.0.1.2")
}

func (r *underlayRig) vxlanDressed(t *testing.T) {
	m := r.m
	vni := m.inspect(t, 1, r.pv).link(t, "ab").Tunnels[0].Key & 0xffffff
	xm, m1m := mustMAC(t, r.xmac), mustMAC(t, m.mac[0])
	// raw sends the packet as raw frames from the stranger's eth0 and tells whether its inner
	// frame reached node a.
	raw := func(src netip.Addr, dst net.HardwareAddr, option, fragment bool) bool {
		magic := []byte("trellis-it-underlay-raw-" + nonce())
		rcv := m.listenFrame(t, 1, r.pv, "a", "eth1", magic, 3*time.Second)
		pkt, _ := hex.DecodeString(vxlanPacket(t, vni, r.macB, magic))
		args := []string{"python3", "-c", sendRawScript, "eth0"}
		for n := 0; n < 5; n++ {
			for _, f := range udpFrames(dst, xm, src, r.m1, pkt, option, fragment) {
				args = append(args, fmt.Sprintf("%x:1", f))
			}
		}
		if out, err := inStranger(r.x, args...); err != nil {
			t.Fatalf("injecting from the stranger: %v\n%s", err, out)
		}
		return rcv.result(t) != nil
	}
	for _, tc := range []struct {
		name             string
		dst              net.HardwareAddr
		option, fragment bool
	}{
		{"an IP option", m1m, true, false},
		{"a broadcast MAC", mustMAC(t, "ff:ff:ff:ff:ff:ff"), false, false},
		{"two fragments, the VXLAN header in the second", m1m, false, true},
	} {
		if raw(r.xaddr, tc.dst, tc.option, tc.fragment) {
			t.Errorf("a VXLAN packet from %v with %s reached node a", r.xaddr, tc.name)
		}
	}
	// The control of the injection, and the residual risk: from m2's address.
	if !raw(r.m2, m1m, false, false) {
		t.Errorf("a VXLAN packet with m2's address as raw frames from the stranger did not reach node a: the injection does not work")
	}
}

func (r *underlayRig) agentEndpoint(t *testing.T) {
	cert, key := selfSigned(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no certificate", nil, "refused"},
		{"self-signed certificate", []string{cert, key}, "refused"},
		{"the cluster's certificate (the control)", []string{r.root.Cert, r.root.Key}, "answered b'HTTP/1.1 "},
	} {
		for _, port := range []string{"7445", "7446"} { // the agent's endpoint, the API
			out, err := inStranger(r.x, append([]string{"python3", "-c", tlsProbeScript, r.m.addr(1), port}, tc.args...)...)
			if err != nil || !strings.HasPrefix(out, tc.want) {
				t.Errorf("%s: port %s said %q (%v), want %q...", tc.name, port, out, err, tc.want)
			}
		}
	}
}

func (r *underlayRig) tcpPorts(t *testing.T) {
	for i, want := range map[int]string{1: "*:7445 " + apiAddr(r.m), 2: "*:7445"} {
		if ls := r.m.tcpListeners(t, i); strings.Join(ls, " ") != want {
			t.Errorf("m%d listens on TCP %v, want only the agent's endpoint (and on m1 the API): %s", i, ls, want)
		}
	}
}

// udpListenScript prints "ready", then the first datagram to UDP port 7777 within 3 s, or
// "nothing".
const udpListenScript = `import socket
s = socket.socket(2, 2)
s.bind(("", 7777))
s.settimeout(3)
print("ready", flush=True)
try:
    print(s.recv(100).decode())
except socket.timeout:
    print("nothing")`

func (r *underlayRig) routeThrough(t *testing.T) {
	magic := "trellis-it-underlay-route-" + nonce()
	rcv := r.m.start(t, 1, r.pe, "a", "python3", "-c", udpListenScript)
	if line, ok := rcv.waitLine(15 * time.Second); !ok || line != "ready" {
		t.Fatalf("listener in node a: %q", line)
	}
	if out, err := inStranger(r.x, "ip", "route", "add", "10.0.1.0/24", "via", r.m.addr(1)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, _ := inStranger(r.x, "python3", "-c", `import socket, sys
s = socket.socket(2, 2)
for i in range(5): s.sendto(sys.argv[1].encode(), ("10.0.1.1", 7777))`, magic)
	if ping, err := inStranger(r.x, "ping", "-c", "2", "-W", "1", "10.0.1.1"); err == nil {
		t.Errorf("the stranger pinged node a through m1:\n%s", ping)
	}
	if err := rcv.wait(10 * time.Second); err != nil || strings.Contains(rcv.stdout.String(), magic) {
		t.Errorf("node a received the stranger's datagram through m1 (%v):\n%s%s", err, out, rcv.stdout)
	}
}

// TestUnderlayHostEngines: the tunnels to a remote engine take packets from the engine's
// machine only, and the listener of its mirror answers only the node's machine; to the
// stranger it is as if nobody listened (no SYN-ACK, no reset).
func TestUnderlayHostEngines(t *testing.T) {
	m := machinesUp(t, 2)
	x, _ := m.stranger(t)
	path := writeTopo(t, fmt.Sprintf(remoteEnginesTopo, m.hostsYAML("egre")))
	m.upAll(t, path, "pdp-cr")
	t.Run("TCP to the mirror's port", func(t *testing.T) {
		port := fmt.Sprint(plan.EngineMirrorPort("pdp-cr", "r", 1))
		if ls := m.tcpListeners(t, 2); strings.Join(ls, " ") != m.addr(2)+":"+port {
			t.Errorf("m2 listens on TCP %v, want only the mirror's %s:%s", ls, m.addr(2), port)
		}
		if out, err := inStranger(x, "python3", "-c", tcpProbeScript, m.addr(2), port); err != nil || strings.TrimSpace(out) != "timeout" {
			t.Errorf("a TCP connection from the stranger to the mirror's port %s: %q (%v), want a timeout (no answer)", port, out, err)
		}
	})
	// Not the underlay's, but the same listener: a local unprivileged user of the node's own
	// machine passes the socket filter (its address is m1's) and must still get nothing.
	t.Run("TCP to the mirror's port from a local user of the node's machine", func(t *testing.T) {
		port := fmt.Sprint(plan.EngineMirrorPort("pdp-cr", "r", 1))
		out, err := inStranger(m.ns(1), "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			"/usr/bin/python3", "-c", mirrorHelloScript, m.addr(2), port)
		if err != nil || strings.TrimSpace(out) != "closed" {
			t.Errorf("uid 65534 on m1 connecting to the mirror's port %s: %q (%v), want \"closed\" (no hello, the helper's connection kept)", port, out, err)
		}
	})
	t.Run("VXLAN to an engine's tunnel from its own address", func(t *testing.T) {
		vni := plan.EngineVNI("pdp-cr", "r", 1, "eth1")
		dev := m.vxlanDevice(t, 1, vni)
		// vxlan sends the packet from namespace ns and tells whether its inner frame came out
		// of m1's end of the tunnel.
		vxlan := func(ns string) bool {
			magic := []byte("trellis-it-underlay-fe-" + nonce())
			// Every ethertype: the engines' program on the device's tc ingress takes the frame
			// before a socket of one ethertype would see it.
			script := strings.Replace(recvFrameScript, "socket.htons(0x88b5)", "socket.htons(3)", 1)
			cmd := exec.Command("ip", "netns", "exec", m.ns(1), "python3", "-c", script, dev, "3", hex.EncodeToString(magic))
			r := &frameReceiver{bg: startBg(t, cmd, "receiver on m1's "+dev), where: "m1's " + dev}
			if line, ok := r.bg.waitLine(15 * time.Second); !ok || line != "ready" {
				t.Fatalf("receiver on m1's %s: %q", dev, line)
			}
			sendVXLAN(t, ns, m.addr(1), fmt.Sprint(plan.EngineVXLANPort), vxlanPacket(t, vni, "02:00:5e:10:00:99", magic))
			return r.result(t) != nil
		}
		if vxlan(x) {
			t.Errorf("a VXLAN packet from %s with engine 1's VNI %d came out of m1's end of the tunnel, %s", strangerAddr, vni, dev)
		}
		if !vxlan(m.ns(2)) {
			t.Errorf("the same VXLAN packet sent from m2 did not come out of %s: the injection does not work", dev)
		}
	})
	m.ping(t, 1, "pdp-cr", "h1", "10.92.2.1") // the mirror still serves m1
	if used := m.remoteFlows(t, 43000, 16); !used[1] {
		t.Errorf("16 flows went to engines %v; want the remote one among them", used)
	}
	for i := 1; i <= 2; i++ {
		m.trellis(t, i, "down", "pdp-cr")
	}
}

// TestUnderlayHostSecret: in a file with hosts, `secret:` keys the tunnels' keys, so that the
// key the names give does not let a host with a machine's address into a link.
func TestUnderlayHostSecret(t *testing.T) {
	m := machinesUp(t, 2)
	x, xmac := m.stranger(t)
	const name = "usecret"
	key := filepath.Join(t.TempDir(), "tunnel.key")
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	m.upAll(t, writeTopo(t, fmt.Sprintf(underlayPairTopo, name, m.hostsYAML("egre")+"secret: "+key+"\n")), name)
	m.ping(t, 1, name, "a", "10.0.1.2") // both machines derived the same keys
	k := m.inspect(t, 1, name).link(t, "ab").Tunnels[0].Key
	guess := plan.TunnelKey(nil, name, "ab")
	if k == guess {
		t.Errorf("link ab's key %#08x is the one its names give", k)
	}
	m2 := netip.MustParseAddr(m.addr(2))
	macB := m.inspect(t, 2, name).mac(t, "b", "eth1")
	if m.egreReaches(t, x, xmac, m2, guess, name, macB) {
		t.Errorf("an EGRE packet from m2's address with the key %#08x of the names reached node a", guess)
	}
	if !m.egreReaches(t, x, xmac, m2, k, name, macB) {
		t.Errorf("an EGRE packet from m2's address with the link's key did not reach node a: the injection does not work")
	}
	for i := 1; i <= 2; i++ {
		m.trellis(t, i, "down", name)
	}
}
