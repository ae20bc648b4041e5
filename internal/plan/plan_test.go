package plan

import (
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/spec"
)

const spread = `name: spread
hosts:
  m1: {address: 198.18.0.1}
  m2: {address: 198.18.0.2, mtu: 9000}
  m3: {address: 198.18.0.3}
nodes:
  a: {host: m3}
  b:
  c:
  d:
  e:
links:
  - endpoints: [a:eth1, b:eth1]
  - endpoints: [b:eth2, c:eth1]
    mtu: 1400
  - endpoints: [a:eth2, b:eth3, c:eth2, d:eth1]
`

func parse(t *testing.T, doc string) *spec.Network {
	t.Helper()
	n, err := spec.Parse("topo.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPlaceBalances(t *testing.T) {
	got := Place(parse(t, spread))
	want := map[string]string{"a": "m3", "b": "m1", "c": "m2", "d": "m1", "e": "m2"}
	for node, host := range want {
		if got[node] != host {
			t.Errorf("node %s on %s, want %s (placement %v)", node, got[node], host, got)
		}
	}
}

func TestMakeForHost(t *testing.T) {
	n := parse(t, spread)
	p, err := Make(n, "scope", "m1")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 2 || p.Nodes[0].Name != "b" || p.Nodes[1].Name != "d" {
		t.Fatalf("nodes on m1: %v", p.Nodes)
	}
	if len(p.Links) != 3 {
		t.Fatalf("links on m1: %d, want 3", len(p.Links))
	}
	ab := p.Links[0]
	if len(ab.Ports) != 1 || len(ab.Tunnels) != 1 || ab.Tunnels[0].Host != "m3" || ab.Tunnels[0].Remote.String() != "198.18.0.3" {
		t.Errorf("link a-b on m1: %+v", ab)
	}
	if ab.MTU != 1500-42 {
		t.Errorf("link a-b MTU %d, want underlay minus 42", ab.MTU)
	}
	if bc := p.Links[1]; bc.MTU != 1400 {
		t.Errorf("link b-c keeps the MTU the file gives: %d", bc.MTU)
	}
	lan := p.Links[2]
	if len(lan.Ports) != 2 || len(lan.Tunnels) != 2 || lan.Bridge == "" {
		t.Errorf("LAN on m1: %+v", lan)
	}
	// Every machine derives the same key for a link.
	p3, err := Make(n, "other-scope", "m3")
	if err != nil {
		t.Fatal(err)
	}
	if p3.Links[0].Tunnels[0].Key != ab.Tunnels[0].Key || ab.Tunnels[0].Key == TunnelKey(n.Name, "link2") {
		t.Errorf("keys: m1 %#x, m3 %#x", ab.Tunnels[0].Key, p3.Links[0].Tunnels[0].Key)
	}
	for _, l := range append(p.Links, p3.Links...) {
		for _, tn := range l.Tunnels {
			if DeviceKind(tn.Device) != 't' || DeviceKind(tn.Encap) != 'u' || DeviceNetID(tn.Device) == "" {
				t.Errorf("tunnel device names %q %q", tn.Device, tn.Encap)
			}
		}
	}
}

func TestMakeVXLANSharesOneDevice(t *testing.T) {
	n := parse(t, strings.Replace(spread, "hosts:", "tunnel: vxlan\nhosts:", 1))
	p, err := Make(n, "scope", "m1")
	if err != nil {
		t.Fatal(err)
	}
	lan := p.Links[2]
	if lan.Tunnels[0].Device != lan.Tunnels[1].Device || DeviceKind(lan.Tunnels[0].Device) != 'v' {
		t.Errorf("VXLAN LAN devices: %+v", lan.Tunnels)
	}
	if p.Links[0].MTU != 1500-50 {
		t.Errorf("VXLAN MTU %d, want underlay minus 50", p.Links[0].MTU)
	}
}

func TestMakeErrors(t *testing.T) {
	n := parse(t, strings.Replace(spread, "mtu: 1400", "mtu: 1480", 1))
	cases := []struct{ host, want string }{
		{"m1", "topo.yaml:15: links[1].mtu: the link crosses machines, and 1480 does not fit in the underlay with the egre tunnel; use at most 1458, or raise the hosts' mtu"},
		{"m9", `topo.yaml: no host named "m9" under hosts`},
		{"", "topo.yaml spreads the network over several hosts: say which one this machine is"},
	}
	for _, c := range cases {
		if _, err := Make(n, "scope", c.host); err == nil || err.Error() != c.want {
			t.Errorf("host %q: got %v\nwant %s", c.host, err, c.want)
		}
	}
}

func TestSingleMachineNames(t *testing.T) {
	n := parse(t, "name: x\nnodes: {a: , b: , c: }\nlinks:\n  - endpoints: [a:e1, b:e1]\n  - endpoints: [a:e2, b:e2, c:e1]\n")
	p, err := Make(n, "scope", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 3 || len(p.Links) != 2 || len(p.Links[1].Ports) != 3 {
		t.Fatalf("plan: %+v", p)
	}
	seen := map[string]bool{}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if len(port.Name) > 15 || seen[port.Name] || DeviceKind(port.Name) != 'p' || DeviceNetID(port.Name) != p.NetID {
				t.Errorf("port name %q", port.Name)
			}
			seen[port.Name] = true
		}
	}
	if DeviceNetID("eth0") != "" || DeviceNetID("trzzzzzzp1") != "" || DeviceKind("tr123456x1") != 0 {
		t.Error("DeviceNetID/DeviceKind accept names trellis does not make")
	}
}
