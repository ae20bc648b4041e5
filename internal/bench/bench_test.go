package bench

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
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
		p, err := plan.Make(n, "abcd1234", "")
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
		if k := findSetup(s); k == nil || k.Pending == "" {
			t.Errorf("setup %s should be listed as pending", s)
		}
	}
}
