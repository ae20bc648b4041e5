package bench

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

func TestUDPFrames(t *testing.T) {
	a := flowAddrs{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcIP: srcIP, DstIP: sinkIP, SrcPort: srcPort, DstPort: sinkPort}
	for _, size := range []int{64, 128, 1500} {
		frames, err := udpFrames(a, size, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range frames {
			if len(f) != size {
				t.Errorf("size %d: frame %d is %d bytes", size, i, len(f))
			}
			if binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 {
				t.Errorf("size %d: not IPv4/UDP", size)
			}
			if ipChecksum(f[14:34]) != 0 {
				t.Errorf("size %d: bad IPv4 header checksum", size)
			}
			if got := binary.BigEndian.Uint16(f[16:]); int(got) != size-14 {
				t.Errorf("size %d: IP length %d", size, got)
			}
			if got := binary.BigEndian.Uint16(f[34:]); got != srcPort+uint16(i) {
				t.Errorf("flow %d: source port %d", i, got)
			}
		}
	}
	if _, err := udpFrames(a, 59, 1); err == nil {
		t.Error("a 59-byte frame was accepted")
	}
}

func TestStat(t *testing.T) {
	s := statOf([]float64{3, 1, math.NaN(), 2, 10})
	if s.Median != 2.5 || s.Min != 1 || s.Max != 10 || len(s.Values) != 4 {
		t.Errorf("statOf = %+v", s)
	}
	if s := statOf(nil); s.Median != 0 || len(s.Values) != 0 {
		t.Errorf("statOf(nil) = %+v", s)
	}
	r := ratioStat([]float64{2, 3}, []float64{1, 0})
	if r.Median != 2 || len(r.Values) != 1 {
		t.Errorf("ratioStat = %+v", r)
	}
}

func TestCPUMask(t *testing.T) {
	for cpu, want := range map[int]string{0: "00000001", 1: "00000002", 33: "00000002,00000000"} {
		if got := cpuMask(cpu); got != want {
			t.Errorf("cpuMask(%d) = %s, want %s", cpu, got, want)
		}
	}
}

// The bench's topologies must pass the same checks as a user's.
func TestTopologies(t *testing.T) {
	for _, c := range []string{spec.Shortbridge, spec.Bridge} {
		n, err := spec.Parse("b.yaml", fmt.Appendf(nil, benchTopology, "bench-x", c, c))
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		p, err := plan.Make(n, "abcd1234", "", &plan.Names{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Links) != 2 || p.Links[0].Connector != c || p.Links[0].Ports[0].Node != "src" {
			t.Errorf("%s: unexpected plan %+v", c, p.Links)
		}
	}
	for _, size := range []int{2, 10, 1000} {
		n, err := spec.Parse("chain.yaml", chainTopology("chain", size))
		if err != nil {
			t.Fatalf("chain of %d: %v", size, err)
		}
		if len(n.Nodes) != size || len(n.Links) != size-1 {
			t.Errorf("chain of %d: %d nodes, %d links", size, len(n.Nodes), len(n.Links))
		}
	}
	if !strings.Contains(string(chainTopology("c", 3)), "10.0.0.5/30") {
		t.Error("second link of a chain is not 10.0.0.4/30")
	}
}

func TestSetupsKnown(t *testing.T) {
	for _, s := range DefaultOptions().Setups {
		if k := findSetup(s); k == nil || k.build == nil {
			t.Errorf("default setup %s cannot be built", s)
		}
	}
	for _, s := range []string{"egre-shortbridge", "egre-bridge", "vxlan"} {
		if !slices.Contains(DefaultOptions().Setups, s) {
			t.Errorf("setup %s is not in a default run", s)
		}
	}
}

// The tunnel setups' topology: source and sink on machine A, the node under test on B, both
// links crossing in the named tunnel, with MTU 1500 inside an underlay of 1600.
func TestSpreadTopology(t *testing.T) {
	for _, c := range []struct{ tunnel, connector string }{{spec.EGRE, spec.Shortbridge}, {spec.EGRE, spec.Bridge}, {spec.VXLAN, spec.Shortbridge}} {
		n, err := spec.Parse("s.yaml", spreadTopology("bench-x", c.tunnel, c.connector, "198.18.101.1", "198.18.101.2"))
		if err != nil {
			t.Fatalf("%s/%s: %v", c.tunnel, c.connector, err)
		}
		wantNodes := map[string][]string{"ma": {"src", "sink"}, "mb": {"nut"}}
		for host, nodes := range wantNodes {
			p, err := plan.Make(n, "abcd1234", host, &plan.Names{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, nd := range p.Nodes {
				got = append(got, nd.Name)
			}
			if !slices.Equal(got, nodes) {
				t.Errorf("%s: nodes on %s are %v, want %v", c.tunnel, host, got, nodes)
			}
			if p.Tunnel != c.tunnel || len(p.Links) != 2 {
				t.Fatalf("%s on %s: tunnel %q, %d links", c.tunnel, host, p.Tunnel, len(p.Links))
			}
			for _, l := range p.Links {
				if len(l.Ports) != 1 || len(l.Tunnels) != 1 || l.MTU != 1500 || l.Connector != c.connector {
					t.Errorf("%s on %s: link %s has %d ports, %d tunnels, MTU %d, connector %s", c.tunnel, host, l.Name, len(l.Ports), len(l.Tunnels), l.MTU, l.Connector)
				}
			}
		}
	}
}

func TestParsePerfReport(t *testing.T) {
	text := []byte(`# Samples: 2K of event 'cpu-clock:pppH'
#
# Overhead       Samples  Symbol
# ........  ............  ......................
#
    40.00%           400  [k] br_handle_frame
    20.00%           200  [k] pv_native_safe_halt
    20.00%           200  [k] bpf_prog_3b185187f1855c4c_shortbridge
    10.00%           100  [k] __netif_receive_skb_core.constprop.0
    10.00%           100  [.] 0x00000000000cc26e
`)
	syms := parsePerfReport(text)
	if len(syms) != 5 || syms[0].name != "br_handle_frame" || !syms[0].kernel || syms[0].samples != 400 || syms[4].kernel {
		t.Fatalf("parsePerfReport = %+v", syms)
	}
	top, groups, busy := profileRows(syms, 1000, 1000)
	if busy != 800 {
		t.Errorf("busy samples %d, want 800 (idle left out)", busy)
	}
	if top[0].Name != "br_handle_frame" || top[0].Percent != 50 || top[0].NSPerFrame != 400e3 {
		t.Errorf("top row %+v", top[0])
	}
	want := map[string]float64{"Linux bridge": 50, "eBPF programs, tc, redirect": 25, "receive core (backlog, RPS, softirq)": 12.5, "user space": 12.5}
	for _, g := range groups {
		if want[g.Name] != g.Percent {
			t.Errorf("group %s: %v%%, want %v%%", g.Name, g.Percent, want[g.Name])
		}
		delete(want, g.Name)
	}
	if len(want) > 0 {
		t.Errorf("groups missing: %v", want)
	}
	for sym, group := range map[string]string{"br_nf_pre_routing": "bridge netfilter (br_nf_*)", "fdb_find_rcu": "Linux bridge", "ip_forward": "IPv4 and routing",
		"veth_xmit": "veth and namespace crossing", "kmem_cache_free": "skb memory", "tc_run": "eBPF programs, tc, redirect", "something_new": "other kernel"} {
		if got := profileGroup(perfSym{name: sym, kernel: true}); got != group {
			t.Errorf("%s is in group %q, want %q", sym, got, group)
		}
	}
}
