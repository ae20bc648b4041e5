//go:build integration

package integration

// A host on the underlay (docs/security.md, "A host on the underlay"): a namespace on the
// simulated machines' switch, with an address of its own, tries what docs/security.md lists
// against a cluster of two machines (agents, etcd, an EGRE and a VXLAN network of tenant t1)
// and against remote engines. One subtest per row of the table.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/plan"
)

// strangerAddr is the attacker's own address on the underlay.
const strangerAddr = "198.18.0.66"

// underlayPairTopo is a network of two nodes, a on m1 and b on m2, joined by link ab.
const underlayPairTopo = `name: %s
%snodes:
  a:
    host: m1
    addresses:
      eth1: [10.0.1.1/24]
  b:
    host: m2
    addresses:
      eth1: [10.0.1.2/24]
links:
  - name: ab
    endpoints: [a:eth1, b:eth1]
`

// stranger adds a host to the machines' underlay switch that is not one of them: namespace
// PREFIX-x with eth0 at strangerAddr (deleted with the machines).
func (m *machines) stranger(t *testing.T) (ns, mac string) {
	t.Helper()
	ns = m.prefix + "-x"
	m.netnsAdd(ns)
	mustHostRun(t, "ip", "-n", m.ul, "link", "add", "x", "type", "veth", "peer", "name", "eth0", "netns", ns)
	mustHostRun(t, "ip", "-n", m.ul, "link", "set", "x", "master", "ul", "up")
	mustHostRun(t, "ip", "-n", ns, "addr", "add", strangerAddr+"/24", "dev", "eth0")
	mustHostRun(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	mustHostRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
	if out, err := hostRun("ip", "netns", "exec", ns, "ping", "-c", "1", "-W", "2", m.addr(1)); err != nil {
		t.Fatalf("the stranger cannot reach m1 over the underlay: %v\n%s", err, out)
	}
	mac = strings.TrimSpace(mustHostRun(t, "ip", "netns", "exec", ns, "cat", "/sys/class/net/eth0/address"))
	return ns, mac
}

// egreReaches injects EGRE packets with key from src into m1 from the stranger's eth0 (ns, with
// MAC xmac), an inner frame from MAC inner, and tells whether the frame reached node a of
// network.
func (m *machines) egreReaches(t *testing.T, ns, xmac string, src netip.Addr, key uint32, network, inner string) bool {
	t.Helper()
	magic := []byte("trellis-it-underlay-" + nonce())
	r := m.listenFrame(t, 1, network, "a", "eth1", magic, 3*time.Second)
	f := egreFrame(mustMAC(t, m.mac[0]), mustMAC(t, xmac), src, netip.MustParseAddr(m.addr(1)), key, probeFrame(t, inner, magic))
	if out, err := inStranger(ns, "python3", "-c", sendRawScript, "eth0", fmt.Sprintf("%x:5", f)); err != nil {
		t.Fatalf("injecting from the stranger: %v\n%s", err, out)
	}
	return r.result(t) != nil
}

// inStranger runs a command in the stranger's namespace.
func inStranger(ns string, argv ...string) (string, error) {
	return hostRun(append([]string{"ip", "netns", "exec", ns}, argv...)...)
}

// probeFrame is an inner Ethernet frame of ethertype frameEtherType carrying magic.
func probeFrame(t *testing.T, src string, magic []byte) []byte {
	f := append(mustMAC(t, "ff:ff:ff:ff:ff:ff"), mustMAC(t, src)...)
	f = append(append(f, 0x88, 0xb5), magic...)
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

// sendVXLANScript sends a UDP datagram (hex) COUNT times to ADDR:PORT from the namespace's own
// address. Arguments: ADDR PORT HEX COUNT.
const sendVXLANScript = `
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[4])):
    s.sendto(bytes.fromhex(sys.argv[3]), (sys.argv[1], int(sys.argv[2])))
    time.sleep(0.02)
`

// tlsProbeScript connects to ADDR:PORT with TLS (any server certificate accepted), with the
// client certificate CERT KEY if given, sends an HTTP request and prints "answered" and the
// first bytes of the answer, or "refused" and why.
const tlsProbeScript = `
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
if len(sys.argv) > 3:
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
try:
    s = ctx.wrap_socket(socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5))
    s.sendall(b"GET /v1/networks HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = s.recv(64)
    print("answered" if data else "refused: closed", data[:20])
except Exception as e:
    print("refused:", type(e).__name__, e)
`

// tcpProbeScript tries a TCP connection to ADDR:PORT and prints "connected", "refused" (a
// reset: an answer too) or "timeout" (no answer at all).
const tcpProbeScript = `
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print("connected")
except ConnectionRefusedError:
    print("refused")
except (socket.timeout, TimeoutError):
    print("timeout")
`

// vxlanPacket is a VXLAN header with vni and the probe frame (source MAC src) behind it, hex.
func vxlanPacket(t *testing.T, vni uint32, src string, magic []byte) string {
	hdr := make([]byte, 8)
	binary.BigEndian.PutUint32(hdr, 0x08000000)
	binary.BigEndian.PutUint32(hdr[4:], vni<<8)
	return hex.EncodeToString(append(hdr, probeFrame(t, src, magic)...))
}

// sendVXLAN sends pkt 5 times to machine to's UDP port from namespace ns.
func sendVXLAN(t *testing.T, ns, to, port, pkt string) {
	t.Helper()
	if out, err := inStranger(ns, "python3", "-c", sendVXLANScript, to, port, pkt, "5"); err != nil {
		t.Fatalf("sending VXLAN from %s: %v\n%s", ns, err, out)
	}
}

// udpFrames is a UDP datagram from src to dst's port 4789 in Ethernet frames from srcMAC to
// dstMAC (UDP checksum 0, allowed over IPv4), dressed as a host trying to slip past a check may
// dress it: with an IPv4 option (a 24-byte header), or cut into two fragments, the first of
// which holds only the UDP header.
func udpFrames(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, payload []byte, option, fragment bool) [][]byte {
	be := binary.BigEndian
	udp := make([]byte, 8, 8+len(payload))
	be.PutUint16(udp[0:], 40000)
	be.PutUint16(udp[2:], 4789)
	be.PutUint16(udp[4:], uint16(8+len(payload)))
	udp = append(udp, payload...)
	ip := func(data []byte, fragOff uint16) []byte {
		hl := 20
		if option {
			hl = 24
		}
		h := make([]byte, hl)
		h[0] = byte(0x40 | hl/4)
		be.PutUint16(h[2:], uint16(hl+len(data)))
		be.PutUint16(h[4:], 0x4242)
		be.PutUint16(h[6:], fragOff)
		h[8], h[9] = 64, 17
		s4, d4 := src.As4(), dst.As4()
		copy(h[12:], s4[:])
		copy(h[16:], d4[:])
		if option {
			copy(h[20:], []byte{1, 1, 1, 0}) // NOP, NOP, NOP, end of options
		}
		be.PutUint16(h[10:], ipChecksum(h))
		f := append(append(append([]byte{}, dstMAC...), srcMAC...), 0x08, 0x00)
		return append(append(f, h...), data...)
	}
	if fragment {
		const mf = 0x2000
		return [][]byte{ip(udp[:8], mf), ip(udp[8:], 1)} // offsets count 8 bytes
	}
	return [][]byte{ip(udp, 0)}
}

// selfSigned writes a self-signed client certificate (CN t1, the tenant's name) and its key.
func selfSigned(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "t1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "self.crt"), filepath.Join(dir, "self.key")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// tcpListeners lists the TCP ports machine i listens on, as "ADDRESS:PORT".
func (m *machines) tcpListeners(t *testing.T, i int) []string {
	t.Helper()
	out, err := m.inNS(i, "ss", "-Htln")
	if err != nil {
		t.Fatalf("ss -Htln on m%d: %v\n%s", i, err, out)
	}
	var ls []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			ls = append(ls, f[3])
		}
	}
	sort.Strings(ls)
	return ls
}

func TestUnderlayHost(t *testing.T) {
	m := machinesUp(t, 2)
	x, xmac := m.stranger(t)
	mustHostRun(t, "ip", "-n", m.ul, "addr", "add", etcdAddr+"/24", "dev", "ul")
	c := etcdtest.StartWith(t, 1, etcdtest.Options{Host: etcdAddr, Netns: m.ul})
	k := &clusterOf{m: m, etcd: c, s: cluster.New(c.Client()), agents: make([]*agentProc, 3)}
	for _, n := range []string{"pe", "pv"} {
		registerNetwork(agent.LocalName("t1", n))
	}
	for i := 1; i <= 2; i++ {
		k.agents[i] = machineAgent(t, m, c, i)
	}
	ctxFile := writeTopo(t, fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\ntenant: t1\n",
		strings.Join(c.Endpoints, ", "), c.Root.CA, c.Root.Cert, c.Root.Key))
	for _, n := range []struct{ name, tunnel string }{{"pe", ""}, {"pv", "tunnel: vxlan\n"}} {
		m.trellis(t, 1, "--cluster", ctxFile, "up", writeTopo(t, fmt.Sprintf(underlayPairTopo, n.name, n.tunnel)))
		k.converged(t, n.name, k.generation(t, n.name))
		m.ping(t, 1, agent.LocalName("t1", n.name), "a", "10.0.1.2")
	}
	pe, pv := agent.LocalName("t1", "pe"), agent.LocalName("t1", "pv")
	m1, m2 := netip.MustParseAddr(m.addr(1)), netip.MustParseAddr(m.addr(2))
	stranger := netip.MustParseAddr(strangerAddr)
	macB := m.inspect(t, 2, pe).mac(t, "b", "eth1")

	egre := func(t *testing.T, src netip.Addr, key uint32) bool {
		t.Helper()
		return m.egreReaches(t, x, xmac, src, key, pe, macB)
	}

	t.Run("EGRE from its own address with the link's key", func(t *testing.T) {
		key := m.inspect(t, 1, pe).link(t, "ab").Tunnels[0].Key // as sniffed on the wire
		before := m.inspect(t, 1, pe).egre(t, "WrongSource")
		if egre(t, stranger, key) {
			t.Errorf("an EGRE packet from %v with the link's key %#08x reached node a", stranger, key)
		}
		if after := m.inspect(t, 1, pe).egre(t, "WrongSource"); after < before+5 {
			t.Errorf("m1 counted %d packets from a wrong source, want 5 more than %d", after, before)
		}
	})

	t.Run("EGRE with m2's address and the key of the names", func(t *testing.T) {
		key := m.inspect(t, 1, pe).link(t, "ab").Tunnels[0].Key
		guess := plan.TunnelKey(nil, pe, "ab")
		if key == guess {
			t.Errorf("link ab's key %#08x is the one its names give", key)
		}
		if egre(t, m2, guess) {
			t.Errorf("an EGRE packet from m2's address %v with the key %#08x of the names reached node a", m2, guess)
		}
		// The residual risk, and the control of the injection: with the key as sniffed on the
		// wire and m2's address, the frame is m2's to the decapsulation program.
		if !egre(t, m2, key) {
			t.Errorf("an EGRE packet from m2's address with the link's key did not reach node a: the injection does not work")
		}
	})

	t.Run("VXLAN from its own address with the link's VNI", func(t *testing.T) {
		tun := m.inspect(t, 1, pv).link(t, "ab").Tunnels[0]
		vni := tun.Key & 0xffffff
		// vxlan sends the packet from namespace ns and tells whether its inner frame, with b's
		// MAC as source, reached node a.
		vxlan := func(ns string) bool {
			magic := []byte("trellis-it-underlay-vx-" + nonce())
			r := m.listenFrame(t, 1, pv, "a", "eth1", magic, 3*time.Second)
			sendVXLAN(t, ns, m.addr(1), "4789", vxlanPacket(t, vni, macB, magic))
			return r.result(t) != nil
		}
		before := m.inspect(t, 1, pv).EGRE["VXLANRefused"]
		if vxlan(x) {
			t.Errorf("a VXLAN packet from %v with the link's VNI %d reached node a", stranger, vni)
		}
		if after := m.inspect(t, 1, pv).EGRE["VXLANRefused"]; after < before+5 {
			t.Errorf("m1 counted %d refused VXLAN packets, want 5 more than %d", after, before)
		}
		if fdb, err := m.inNS(1, "bridge", "fdb", "show", "dev", tun.Device); err != nil || strings.Contains(fdb, strangerAddr) {
			t.Errorf("m1's VXLAN device learnt the stranger's address (%v):\n%s", err, fdb)
		}
		if !vxlan(m.ns(2)) {
			t.Errorf("the same VXLAN packet sent from m2 did not reach node a: the injection does not work")
		}
		m.ping(t, 1, pv, "a", "10.0.1.2")
	})

	t.Run("VXLAN from its own address, with an IP option, to a broadcast MAC, or in fragments", func(t *testing.T) {
		vni := m.inspect(t, 1, pv).link(t, "ab").Tunnels[0].Key & 0xffffff
		xm, m1m := mustMAC(t, xmac), mustMAC(t, m.mac[0])
		bcast := mustMAC(t, "ff:ff:ff:ff:ff:ff")
		// raw sends the packet as raw frames from the stranger's eth0 and tells whether its
		// inner frame reached node a.
		raw := func(src netip.Addr, dst net.HardwareAddr, option, fragment bool) bool {
			magic := []byte("trellis-it-underlay-raw-" + nonce())
			r := m.listenFrame(t, 1, pv, "a", "eth1", magic, 3*time.Second)
			pkt, _ := hex.DecodeString(vxlanPacket(t, vni, macB, magic))
			args := []string{"python3", "-c", sendRawScript, "eth0"}
			for n := 0; n < 5; n++ {
				for _, f := range udpFrames(dst, xm, src, m1, pkt, option, fragment) {
					args = append(args, fmt.Sprintf("%x:1", f))
				}
			}
			if out, err := inStranger(x, args...); err != nil {
				t.Fatalf("injecting from the stranger: %v\n%s", err, out)
			}
			return r.result(t) != nil
		}
		for _, tc := range []struct {
			name             string
			dst              net.HardwareAddr
			option, fragment bool
		}{
			{"an IP option", m1m, true, false},
			{"a broadcast MAC", bcast, false, false},
			{"two fragments, the VXLAN header in the second", m1m, false, true},
		} {
			if raw(stranger, tc.dst, tc.option, tc.fragment) {
				t.Errorf("a VXLAN packet from %v with %s reached node a", stranger, tc.name)
			}
		}
		// The control of the injection, and the residual risk: from m2's address.
		if !raw(m2, m1m, false, false) {
			t.Errorf("a VXLAN packet with m2's address as raw frames from the stranger did not reach node a: the injection does not work")
		}
	})

	t.Run("agent endpoint without a certificate of the cluster", func(t *testing.T) {
		cert, key := selfSigned(t)
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"no certificate", nil, "refused"},
			{"self-signed certificate", []string{cert, key}, "refused"},
			{"the cluster's certificate (the control)", []string{c.Root.Cert, c.Root.Key}, "answered b'HTTP/1.1 "},
		} {
			out, err := inStranger(x, append([]string{"python3", "-c", tlsProbeScript, m.addr(1), "7445"}, tc.args...)...)
			if err != nil || !strings.HasPrefix(out, tc.want) {
				t.Errorf("%s: the agent's endpoint said %q (%v), want %q...", tc.name, out, err, tc.want)
			}
		}
	})

	t.Run("every TCP port of the machines", func(t *testing.T) {
		for i := 1; i <= 2; i++ {
			if ls := m.tcpListeners(t, i); strings.Join(ls, " ") != "*:7445" {
				t.Errorf("m%d listens on TCP %v, want only the agent's endpoint *:7445", i, ls)
			}
		}
	})

	t.Run("route through a machine to a node", func(t *testing.T) {
		magic := "trellis-it-underlay-route-" + nonce()
		r := m.start(t, 1, pe, "a", "python3", "-c", `import socket, sys
s = socket.socket(2, 2)
s.bind(("", 7777))
s.settimeout(3)
print("ready", flush=True)
try:
    print(s.recv(100).decode())
except socket.timeout:
    print("nothing")`)
		if line, ok := r.waitLine(15 * time.Second); !ok || line != "ready" {
			t.Fatalf("listener in node a: %q", line)
		}
		if out, err := inStranger(x, "ip", "route", "add", "10.0.1.0/24", "via", m.addr(1)); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		out, _ := inStranger(x, "python3", "-c", `import socket, sys
s = socket.socket(2, 2)
for i in range(5): s.sendto(sys.argv[1].encode(), ("10.0.1.1", 7777))`, magic)
		if ping, err := inStranger(x, "ping", "-c", "2", "-W", "1", "10.0.1.1"); err == nil {
			t.Errorf("the stranger pinged node a through m1:\n%s", ping)
		}
		if err := r.wait(10 * time.Second); err != nil || strings.Contains(r.stdout.String(), magic) {
			t.Errorf("node a received the stranger's datagram through m1 (%v):\n%s%s", err, out, r.stdout)
		}
	})

	for _, n := range []string{"pe", "pv"} {
		m.trellis(t, 1, "--cluster", ctxFile, "down", n)
	}
}

// vxlanDevice is the name of the VXLAN device with vni in machine i's namespace.
func (m *machines) vxlanDevice(t *testing.T, i int, vni uint32) string {
	t.Helper()
	out, err := m.inNS(i, "ip", "-d", "-o", "link", "show", "type", "vxlan")
	if err != nil {
		t.Fatalf("ip link on m%d: %v\n%s", i, err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.Contains(line, fmt.Sprintf(" vxlan id %d ", vni)) {
			return strings.TrimSuffix(f[1], ":")
		}
	}
	t.Fatalf("m%d has no VXLAN device with VNI %d:\n%s", i, vni, out)
	return ""
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
