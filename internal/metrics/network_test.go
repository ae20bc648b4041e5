package metrics

import (
	"bytes"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"golang.org/x/sys/unix"
)

// TestReadNetwork writes the metrics of a network read by a scrape: three nodes (one down, one
// whose kind tells no usage), a link between two of them with its ports' counters read from
// the nodes' side, and checks each line.
func TestReadNetwork(t *testing.T) {
	p := &plan.Plan{Network: "net", NetID: "n1", Nodes: []*plan.Node{{Node: &spec.Node{Name: "a"}}, {Node: &spec.Node{Name: "b"}}, {Node: &spec.Node{Name: "c"}}},
		Links: []*plan.Link{{Name: "a:eth1--b:eth1", Ports: []plan.Port{{Node: "a", Ifname: "eth1", Name: "p0"}, {Node: "b", Ifname: "eth1", Name: "p1"}}}}}
	n := &network{rec: &state.Record{Name: "net", Status: "up", Plan: p},
		running: map[string]kinds.Instance{"a": {PID: 10}, "b": {PID: 11}},
		usage:   map[string]kinds.Usage{"a": {CPUSeconds: 1.5, Memory: 4096, Processes: 3, OOMKills: 1}},
		ifaces: map[int]map[string]rtnl.Stats{
			4: {"eth1": {RxPackets: 5, TxPackets: 6, RxBytes: 500, TxBytes: 600, RxDropped: 1, TxDropped: 2}},
		}}
	s := &snapshot{out: samples{}, shaper: map[int]uint64{20: 9}, tunnels: map[string]*plan.Plan{},
		devs: map[string]rtnl.Link{"p0": {Index: 20, Flags: unix.IFF_UP, PeerNetNsID: 4}, "p1": {Index: 21, PeerNetNsID: 5}}}
	c := &Collector{machine: "m"}
	c.readNetwork(s, n)
	var out bytes.Buffer
	s.out.writeTo(&out)
	text := out.String()
	lines := []struct {
		line string
		want bool
	}{
		{`trellis_node_up{machine="m",network="net",node="a"} 1`, true},
		{`trellis_node_up{machine="m",network="net",node="c"} 0`, true},
		{`trellis_node_cpu_seconds_total{machine="m",network="net",node="a"} 1.5`, true},
		{`trellis_node_memory_bytes{machine="m",network="net",node="a"} 4096`, true},
		{`trellis_node_processes{machine="m",network="net",node="a"} 3`, true},
		{`trellis_node_oom_kills_total{machine="m",network="net",node="a"} 1`, true},
		{`trellis_node_memory_bytes{machine="m",network="net",node="b"}`, false}, // its kind told nothing
		{`trellis_port_up{interface="eth1",link="a:eth1--b:eth1",machine="m",network="net",node="a"} 1`, true},
		{`trellis_port_up{interface="eth1",link="a:eth1--b:eth1",machine="m",network="net",node="b"} 0`, true},
		{`trellis_port_rx_frames_total{interface="eth1",link="a:eth1--b:eth1",machine="m",network="net",node="a"} 5`, true},
		{`trellis_port_tx_bytes_total{interface="eth1",link="a:eth1--b:eth1",machine="m",network="net",node="a"} 600`, true},
		{`trellis_port_tx_drops_total{interface="eth1",link="a:eth1--b:eth1",machine="m",network="net",node="a"} 2`, true},
		{`trellis_port_shaper_drops_total{interface="eth1",link="a:eth1--b:eth1",machine="m",network="net",node="a"} 9`, true},
		// b's namespace was not read (it ended meanwhile): zero, not a's counters.
		{`trellis_port_rx_frames_total{interface="eth1",link="a:eth1--b:eth1",machine="m",network="net",node="b"} 0`, true},
	}
	for _, l := range lines {
		if strings.Contains(text, l.line) != l.want {
			t.Errorf("%q in the scrape: %v, want %v\n%s", l.line, !l.want, l.want, text)
		}
	}
}
