package plan_test

import (
	"fmt"
	"strings"
	"testing"

	_ "github.com/trellisnet/trellis/internal/kinds/all"
	"github.com/trellisnet/trellis/internal/plan"
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
	got, err := plan.Place(parse(t, spread))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "m3", "b": "m1", "c": "m2", "d": "m1", "e": "m2"}
	for node, host := range want {
		if got[node] != host {
			t.Errorf("node %s on %s, want %s (placement %v)", node, got[node], host, got)
		}
	}
}

func TestMakeForHost(t *testing.T) {
	n := parse(t, spread)
	p, err := plan.Make(n, "scope", "m1", &plan.Names{})
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
	if len(lan.Ports) != 2 || len(lan.Tunnels) != 2 || lan.Device == "" {
		t.Errorf("LAN on m1: %+v", lan)
	}
	// Every machine derives the same key for a link.
	p3, err := plan.Make(n, "other-scope", "m3", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	if p3.Links[0].Tunnels[0].Key != ab.Tunnels[0].Key || ab.Tunnels[0].Key == plan.TunnelKey(nil, n.Name, n.Links[1].Name) {
		t.Errorf("keys: m1 %#x, m3 %#x", ab.Tunnels[0].Key, p3.Links[0].Tunnels[0].Key)
	}
	for _, l := range append(p.Links, p3.Links...) {
		for _, tn := range l.Tunnels {
			if plan.DeviceKind(tn.Device) != 't' || plan.DeviceKind(tn.Encap) != 'u' || plan.DeviceNetID(tn.Device) == "" {
				t.Errorf("tunnel device names %q %q", tn.Device, tn.Encap)
			}
		}
	}
}

func TestMakeVXLANSharesOneDevice(t *testing.T) {
	n := parse(t, strings.Replace(spread, "hosts:", "tunnel: vxlan\nhosts:", 1))
	p, err := plan.Make(n, "scope", "m1", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	lan := p.Links[2]
	if lan.Tunnels[0].Device != lan.Tunnels[1].Device || plan.DeviceKind(lan.Tunnels[0].Device) != 't' || lan.Tunnels[0].Encap != "" {
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
		if _, err := plan.Make(n, "scope", c.host, &plan.Names{}); err == nil || err.Error() != c.want {
			t.Errorf("host %q: got %v\nwant %s", c.host, err, c.want)
		}
	}
}

func TestSingleMachineNames(t *testing.T) {
	n := parse(t, "name: x\nnodes: {a: , b: , c: }\nlinks:\n  - endpoints: [a:e1, b:e1]\n  - endpoints: [a:e2, b:e2, c:e1]\n")
	p, err := plan.Make(n, "scope", "", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 3 || len(p.Links) != 2 || len(p.Links[1].Ports) != 3 {
		t.Fatalf("plan: %+v", p)
	}
	seen := map[string]bool{}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if len(port.Name) > 15 || seen[port.Name] || plan.DeviceKind(port.Name) != 'p' || plan.DeviceNetID(port.Name) != p.NetID {
				t.Errorf("port name %q", port.Name)
			}
			seen[port.Name] = true
		}
	}
	if plan.DeviceNetID("eth0") != "" || plan.DeviceNetID("trzzzzzzp1") != "" || plan.DeviceKind("tr123456x1") != 0 {
		t.Error("DeviceNetID/DeviceKind accept names trellis does not make")
	}
}

// names lists every device name of a plan by the object it belongs to.
func names(p *plan.Plan) map[string]string {
	out := map[string]string{}
	for _, l := range p.Links {
		out["link/"+l.Name] = l.Device
		for _, port := range l.Ports {
			out["port/"+l.Name+"/"+port.String()] = port.Name
		}
		for _, tn := range l.Tunnels {
			out["tunnel/"+l.Name+"/"+tn.Host] = tn.Device + " " + tn.Encap + fmt.Sprint(tn.Key)
		}
	}
	return out
}

// Names derive from identities: reordering the file, or adding and removing other objects,
// renames nothing that stays, and a removed object's name is never given again.
func TestNamesAreStable(t *testing.T) {
	base := "name: x\nnodes: {a: , b: , c: , d: }\nlinks:\n"
	l1 := "  - endpoints: [a:e1, b:e1]\n"
	l2 := "  - endpoints: [b:e2, c:e1, d:e1]\n    name: lan\n"
	l3 := "  - endpoints: [c:e2, d:e2]\n"
	cases := []struct {
		name, first, second string
	}{
		{"reordered", base + l1 + l2, base + l2 + l1},
		{"link added", base + l1 + l2, base + l3 + l1 + l2},
		{"link removed", base + l1 + l3 + l2, base + l1 + l2},
		{"LAN member added", base + l1 + l2, base + l1 + "  - endpoints: [b:e2, c:e1, d:e1, a:e9]\n    name: lan\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := &plan.Names{}
			p1, err := plan.Make(parse(t, c.first), "scope", "", ns)
			if err != nil {
				t.Fatal(err)
			}
			before := names(p1)
			ns.Keep(p1)
			p2, err := plan.Make(parse(t, c.second), "scope", "", ns)
			if err != nil {
				t.Fatal(err)
			}
			after := names(p2)
			used := map[string]string{}
			for id, name := range before {
				if a, ok := after[id]; ok && a != name {
					t.Errorf("%s was %s, is %s", id, name, a)
				}
				used[name] = id
			}
			for id, name := range after {
				if old, ok := used[name]; ok && old != id {
					t.Errorf("%s gets %s, which was %s's", id, name, old)
				}
			}
		})
	}
}

func TestPlaceByCapacity(t *testing.T) {
	hosts := "hosts:\n  m1: {address: 198.18.0.1, cpu: 2, memory: 1G}\n  m2: {address: 198.18.0.2, cpu: 2, memory: 1G, rate: 1gbit}\n"
	node := func(name, extra string) string { return "  " + name + ": {cpu: 1, memory: 256M" + extra + "}\n" }
	cases := []struct {
		name    string
		nodes   string
		links   string
		wantErr string // "" to succeed
		pinned  map[string]string
	}{
		{"fits and keeps neighbours together", node("a", "") + node("b", "") + node("c", "") + node("d", ""),
			"  - endpoints: [a:e1, b:e1]\n    rate: 100mbit\n  - endpoints: [c:e1, d:e1]\n    rate: 100mbit\n", "", nil},
		{"pinned node stays", node("a", ", host: m2") + node("b", ""), "  - endpoints: [a:e1, b:e1]\n", "", map[string]string{"a": "m2"}},
		{"cpu short", node("a", "") + node("b", "") + node("c", "") + node("d", "") + node("e", ""), "  - endpoints: [a:e1, b:e1]\n", "cpu", nil},
		{"memory short", "  a: {memory: 2G}\n  b:\n", "  - endpoints: [a:e1, b:e1]\n", "memory", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := parse(t, "name: cap\n"+hosts+"nodes:\n"+c.nodes+"links:\n"+c.links)
			got, err := plan.Place(n)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), ": hosts: the network does not fit") {
					t.Fatalf("Place = %v, %v; want an error at hosts naming %s", got, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cpu := map[string]float64{}
			for _, nd := range n.Nodes {
				cpu[got[nd.Name]] += nd.Needs.CPU
			}
			for m, used := range cpu {
				if used > 2 {
					t.Errorf("machine %s holds %g cores of nodes, has 2: %v", m, used, got)
				}
			}
			for nd, m := range c.pinned {
				if got[nd] != m {
					t.Errorf("node %s on %s, pinned to %s", nd, got[nd], m)
				}
			}
			for _, l := range n.Links {
				if l.Rate > 0 && got[l.Endpoints[0].Node] != got[l.Endpoints[1].Node] {
					t.Errorf("link %s crosses machines though both fit on one: %v", l.Name, got)
				}
			}
		})
	}
}

// TestTunnelKeySecret: with a secret, a link's key is not the one its names give, and another
// secret gives another key; without one, every machine still derives the same key from names.
func TestTunnelKeySecret(t *testing.T) {
	names := plan.TunnelKey(nil, "t1.chain", "ab")
	for _, tc := range []struct {
		name   string
		secret []byte
		differ bool // from the key of the names alone
	}{
		{"no secret", nil, false},
		{"empty secret", []byte{}, false},
		{"secret", []byte("0123456789abcdef"), true},
		{"another secret", []byte("fedcba9876543210"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := plan.TunnelKey(tc.secret, "t1.chain", "ab")
			if k != plan.TunnelKey(tc.secret, "t1.chain", "ab") || (k != names) != tc.differ || k&0xffffff == 0 {
				t.Errorf("key %#x (names alone: %#x)", k, names)
			}
		})
	}
	if plan.TunnelKey([]byte("0123456789abcdef"), "t1.chain", "ab") == plan.TunnelKey([]byte("fedcba9876543210"), "t1.chain", "ab") {
		t.Error("two secrets give the same key")
	}
}

func TestDelayPair(t *testing.T) {
	hold, ret := plan.DelayPair("tr1ed39fp12")
	if hold != "tr1ed39fh12" || ret != "tr1ed39fr12" || plan.DeviceNetID(hold) != "1ed39f" || plan.DeviceKind(ret) != 'r' {
		t.Errorf("DelayPair: %q %q", hold, ret)
	}
	if h, r := plan.DelayPair("tr1ed39fb1"); h != "" || r != "" {
		t.Errorf("DelayPair of a connector device: %q %q", h, r)
	}
}
