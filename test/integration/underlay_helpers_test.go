//go:build integration

package integration

// Helpers of underlay_test.go: the stranger on the underlay and what it sends.

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
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
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
