package agent

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/cluster"
	_ "github.com/trellisnet/trellis/internal/kinds/all" // the tunnel kinds the files name
)

func TestDesired(t *testing.T) {
	const src = "name: lab\nnodes:\n  a: {}\n  b:\n    files:\n      - path: /etc/b.conf\n        source: b.conf\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n"
	u := func(a string, mtu int) cluster.Underlay {
		return cluster.Underlay{Address: netip.MustParseAddr(a), MTU: mtu}
	}
	for _, tc := range []struct {
		name    string
		sources map[string]string
		nodes   map[string]string
		secret  string
		err     string
	}{
		{"two machines", map[string]string{"/top/b.conf": "b\n"}, map[string]string{"a": "m2", "b": "m1"}, "00ff", ""},
		{"node on a machine without address", map[string]string{"/top/b.conf": "b\n"}, map[string]string{"a": "m3", "b": "m1"}, "", `node a is on machine "m3"`},
		{"node not placed", map[string]string{"/top/b.conf": "b\n"}, map[string]string{"b": "m1"}, "", `node a is on machine ""`},
		{"source not stored", nil, map[string]string{"a": "m2", "b": "m1"}, "", "cannot read /top/b.conf"},
		{"secret not hex", map[string]string{"/top/b.conf": "b\n"}, map[string]string{"a": "m2", "b": "m1"}, "zz", "secret: encoding/hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &cluster.Network{Tenant: "t1", Name: "lab", File: "/top/lab.yaml", Source: src, Sources: tc.sources}
			p := &cluster.Placement{Tenant: "t1", Network: "lab", Generation: 5, Nodes: tc.nodes, Secret: tc.secret,
				Machines: map[string]cluster.Underlay{"m2": u("198.18.0.2", 0), "m1": u("198.18.0.1", 9000)},
				Keys:     map[string]uint32{"a:eth1--b:eth1": 0x1234567}}
			sn, err := Desired(n, p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Desired: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sn.Name != "t1.lab" || len(sn.Hosts) != 2 || sn.Hosts[0].Name != "m1" || sn.Hosts[0].MTU != 9000 || sn.Hosts[1].MTU != 1500 ||
				sn.Node("a").Host != "m2" || sn.Node("b").Host != "m1" || sn.Node("b").Files[0].Content != "b\n" || sn.Tunnel != "egre" ||
				string(sn.TunnelSecret) != "\x00\xff" {
				t.Errorf("Desired: name %q, hosts %v, a on %q, b on %q, tunnel %q", sn.Name, sn.Hosts, sn.Node("a").Host, sn.Node("b").Host, sn.Tunnel)
			}
			if k := sn.Links[0].TunnelKey; k != 0x1234567 {
				t.Errorf("Desired: link's tunnel key %#x, want the placement's 0x1234567", k)
			}
		})
	}
}

func TestLocalName(t *testing.T) {
	tenant, network, ok := splitLocal(LocalName("t1", "lab"))
	if !ok || tenant != "t1" || network != "lab" {
		t.Errorf("splitLocal(LocalName(t1, lab)) = %q, %q, %v", tenant, network, ok)
	}
	if _, _, ok := splitLocal("lab"); ok {
		t.Error("a network of one machine (no dot) taken for a cluster's")
	}
}

// TestSource checks the source a machine's record gives for each generation of a network.
func TestSource(t *testing.T) {
	if got, want := Source("alice", "lab", 42), "etcd:/trellis/v1/networks/alice/lab@42"; got != want {
		t.Errorf("Source = %q, want %q", got, want)
	}
	if Source("alice", "lab", 42) == Source("alice", "lab", 43) {
		t.Error("two generations of a network have one source: the agent would keep one's live state in the other")
	}
}
