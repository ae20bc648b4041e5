package plan_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// An engine with another machine's host: the node's machine's plan knows that machine's
// address; the other machine's plan holds the node's engines there, with the node's
// interfaces (names, MACs) and the node's machine; a third machine has none of it.
func TestRemoteEngines(t *testing.T) {
	doc := `name: cr
hosts:
  m1: {address: 198.18.0.1}
  m2: {address: 198.18.0.2}
  m3: {address: 198.18.0.3}
nodes:
  r:
    host: m1
    engines:
      - {}
      - host: m2
      - host: m1
  a: {host: m1}
  b: {host: m3}
links:
  - endpoints: [a:eth1, r:eth1]
    mtu: 1400
  - endpoints: [r:eth2, b:eth1]
`
	n, err := spec.Parse("cr.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	plans := map[string]*plan.Plan{}
	for _, h := range []string{"m1", "m2", "m3"} {
		if plans[h], err = plan.Make(n, "s-"+h, h, &plan.Names{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		host       string
		wantHosts  map[string]netip.Addr
		wantHosted []int // engines of r held there
	}{
		{"m1", map[string]netip.Addr{"m2": netip.MustParseAddr("198.18.0.2")}, nil},
		{"m2", nil, []int{1}},
		{"m3", nil, nil},
	}
	for _, tt := range tests {
		p := plans[tt.host]
		if len(p.Hosts) != len(tt.wantHosts) || (tt.wantHosts != nil && p.Hosts["m2"] != tt.wantHosts["m2"]) {
			t.Errorf("%s: Hosts = %v, want %v", tt.host, p.Hosts, tt.wantHosts)
		}
		h := p.HostedNode("r")
		if (h == nil) != (tt.wantHosted == nil) {
			t.Fatalf("%s: hosted r = %+v, want engines %v", tt.host, h, tt.wantHosted)
		}
		if h == nil {
			continue
		}
		if !slices.Equal(h.Here, tt.wantHosted) || h.Home != "m1" || h.HomeAddr != netip.MustParseAddr("198.18.0.1") || len(h.Engines) != 3 {
			t.Errorf("%s: hosted %+v", tt.host, h)
		}
		// eth2's link crosses to m3: the copy gets the MTU the node's port has on m1.
		want := []plan.HostedIface{{Name: "eth1", MAC: plan.MAC("cr", "r", "eth1"), MTU: 1400},
			{Name: "eth2", MAC: plan.MAC("cr", "r", "eth2"), MTU: plans["m1"].Links[1].MTU}}
		if !slices.Equal(h.Ifaces, want) || want[1].MTU == 0 {
			t.Errorf("%s: interfaces %+v, want %+v", tt.host, h.Ifaces, want)
		}
	}
	if !plan.Remote(n.Node("r").Engines[1], "m1") || plan.Remote(n.Node("r").Engines[2], "m1") || plan.Remote(n.Node("r").Engines[0], "m1") {
		t.Error("Remote: only engine 1 is on another machine than m1")
	}
	// Both ends of engine 1's tunnels vet the same VNIs, each from the other's address.
	m1, m2 := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	peers := map[string][]plan.VXLANPeer{}
	for h, p := range plans {
		peers[h] = p.EnginePeers()
		slices.SortFunc(peers[h], func(a, b plan.VXLANPeer) int { return int(a.VNI) - int(b.VNI) })
	}
	var want1, want2 []plan.VXLANPeer
	for _, ifn := range []string{"eth1", "eth2"} {
		want1 = append(want1, plan.VXLANPeer{VNI: plan.EngineVNI("cr", "r", 1, ifn), Remote: m2})
		want2 = append(want2, plan.VXLANPeer{VNI: plan.EngineVNI("cr", "r", 1, ifn), Remote: m1})
	}
	slices.SortFunc(want1, func(a, b plan.VXLANPeer) int { return int(a.VNI) - int(b.VNI) })
	slices.SortFunc(want2, func(a, b plan.VXLANPeer) int { return int(a.VNI) - int(b.VNI) })
	if !slices.Equal(peers["m1"], want1) || !slices.Equal(peers["m2"], want2) || len(peers["m3"]) != 0 {
		t.Errorf("EnginePeers: m1 %v, m2 %v, m3 %v; want %v, %v and none", peers["m1"], peers["m2"], peers["m3"], want1, want2)
	}
}

// The VNIs and mirror ports are the same on every machine (they derive from names only), in
// range, and differ between engines and interfaces.
func TestEngineVNIAndPort(t *testing.T) {
	seen := map[uint32]string{}
	for _, node := range []string{"r1", "r2"} {
		for i := range 3 {
			for _, ifn := range []string{"eth1", "eth2"} {
				v := plan.EngineVNI("net", node, i, ifn)
				if v == 0 || v > 0xffffff || v != plan.EngineVNI("net", node, i, ifn) {
					t.Fatalf("VNI %d for %s/%d/%s", v, node, i, ifn)
				}
				if other, ok := seen[v]; ok {
					t.Fatalf("VNI %d twice: %s and %s/%d/%s", v, other, node, i, ifn)
				}
				seen[v] = node + ifn
			}
			if p := plan.EngineMirrorPort("net", node, i); p < 20000 || p > 29999 {
				t.Fatalf("mirror port %d", p)
			}
		}
	}
}
