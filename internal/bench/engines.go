package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// PartEngines measures parallel forwarding engines (PdP): rate, TCP, reordering and delay
// through a node with 1 to 3 engines under each dispatch, against a plain node, and how long
// the FIB takes to reach the engines.
const PartEngines = "engines"

// enginesNet is the part's network: src -- nut -- sink; %s is nut's engines and dispatch.
const enginesNet = `name: bench-pdp
nodes:
  src:
    addresses: {eth1: [10.8.1.1/24]}
    sysctl: {net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
    exec: ["ip route add default via 10.8.1.2"]
  nut:
%s    addresses: {eth1: [10.8.1.2/24], eth2: [10.8.2.1/24]}
    sysctl: {net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
  sink:
    addresses: {eth1: [10.8.2.2/24]}
    sysctl: {net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
    exec: ["ip route add default via 10.8.2.1"]
links:
  - endpoints: [src:eth1, nut:eth1]
  - endpoints: [nut:eth2, sink:eth1]
`

// enginesCase is one node set-up the part measures.
type enginesCase struct {
	engines  int
	dispatch string
	weights  []int
	fib      int
}

// enginesCases are the set-ups of a run: a plain node, then 1 to 3 engines with each
// dispatch; a full run adds a full table (FullTable prefixes) for the plain node, 1 and 3 engines.
func enginesCases(quick bool) []enginesCase {
	cs := []enginesCase{{engines: 0}, {1, spec.DispatchFlow, nil, 0}}
	for _, n := range []int{2, 3} {
		w := []int{1, 2}
		if n == 3 {
			w = []int{1, 1, 2}
		}
		cs = append(cs, enginesCase{n, spec.DispatchFlow, nil, 0}, enginesCase{n, spec.DispatchRoundRobin, nil, 0},
			enginesCase{n, spec.DispatchWeighted, w, 0})
	}
	if !quick {
		cs = append(cs, enginesCase{engines: 0, fib: FullTable}, enginesCase{1, spec.DispatchFlow, nil, FullTable},
			enginesCase{3, spec.DispatchFlow, nil, FullTable})
	}
	return cs
}

// FullTable is the size of the synthetic full table: the paper's 170 000 prefixes.
const FullTable = 170000

// topology writes nut's part of the file: engines on CPUs in turn (receive steering), and
// weights for weighted dispatch.
func (c enginesCase) topology() []byte {
	if c.engines == 0 {
		return fmt.Appendf(nil, enginesNet, "")
	}
	var b strings.Builder
	b.WriteString("    engines:\n")
	for i := range c.engines {
		fmt.Fprintf(&b, "      - cpus: %d\n", i%runtime.NumCPU())
		if c.dispatch == spec.DispatchWeighted {
			fmt.Fprintf(&b, "        weight: %d\n", c.weights[i])
		}
	}
	fmt.Fprintf(&b, "    dispatch: %s\n", c.dispatch)
	return fmt.Appendf(nil, enginesNet, b.String())
}

func (c enginesCase) String() string {
	if c.engines == 0 {
		return fmt.Sprintf("plain node, FIB %d", c.fib)
	}
	return fmt.Sprintf("%d engines, %s, FIB %d", c.engines, c.dispatch, c.fib)
}

// engines runs the part: each case is a live change of one running network (`up` of the
// case's file), the FIB added in nut's control node and mirrored into its engines.
func (r *runner) engines() (err error) {
	st, err := r.h.Store()
	if err != nil {
		return err
	}
	const name = "bench-pdp"
	defer func() { err = errors.Join(err, setup.DownQuiet(st, name)) }()
	meter, merr := measure.NewSoftirqMeter()
	if merr != nil {
		r.note("engines: softirq time per core not measured: %v", merr)
	} else {
		defer meter.Close()
	}
	var rows []*result.EnginesRow
	for _, c := range enginesCases(r.opt.Quick) {
		if err := setup.DownQuiet(st, name); err != nil { // each case from a fresh FIB
			return err
		}
		n, err := spec.Parse(name+".yaml", c.topology())
		if err != nil {
			return err
		}
		if _, err := substrate.Up(context.Background(), st, n, "", name+".yaml", r.opt.Substrate); err != nil {
			return fmt.Errorf("%s: up: %w", c, err)
		}
		row, err := r.enginesRow(st, name, c, meter)
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		rows = append(rows, row)
	}
	ratios(rows)
	r.rep.Engines = rows
	return r.mirrorDelays(st, name)
}

// ratios fills each row's peak ratio to the 1-engine flow row of its FIB, and each row's RTT
// overhead over the plain node of its FIB.
func ratios(rows []*result.EnginesRow) {
	for _, row := range rows {
		for _, base := range rows {
			if base.FIBPrefixes != row.FIBPrefixes {
				continue
			}
			if base.Engines == 1 && base.Dispatch == spec.DispatchFlow && base.PeakPPS > 0 {
				row.PeakRatioToOneEngine = row.PeakPPS / base.PeakPPS
			}
			if base.Engines == 0 && row.Engines > 0 {
				row.RTTOverheadUS = row.RTTUS - base.RTTUS
			}
		}
	}
}

// enginesRow measures one case on the running network; meter (nil: none) times the cores'
// NET_RX softirq during the peak trials.
func (r *runner) enginesRow(st *state.Store, name string, c enginesCase, meter *measure.SoftirqMeter) (*result.EnginesRow, error) {
	rec, err := st.Load(name)
	if err != nil || rec == nil {
		return nil, fmt.Errorf("no record after up (%v)", err)
	}
	pids := rec.Nodes
	if c.fib > 0 {
		if _, err := addRoutes(pids["nut"], c.engines, randomPrefixes(c.fib), st, rec.NetID); err != nil {
			return nil, err
		}
	}
	// Resolve every next hop (in nut and its engines) before measuring.
	if _, err := nodeOutput(pids["src"], "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.8.2.2"); err != nil {
		return nil, fmt.Errorf("no path through nut: %w", err)
	}
	row := &result.EnginesRow{Engines: c.engines, Dispatch: c.dispatch, FIBPrefixes: c.fib}
	p, err := openEnginesProbe(pids)
	if err != nil {
		return nil, err
	}
	defer p.close()
	fePorts := rec.Plan.Node("nut").FEPorts
	before := feCounts(fePorts)
	busy, err := startBusy(meter)
	if err != nil {
		return nil, err
	}
	var peaks []float64
	for rep := 0; rep < r.opt.Repeat; rep++ {
		pps, err := p.peak(r.opt.Trial)
		if err != nil {
			return nil, err
		}
		peaks = append(peaks, pps)
	}
	row.PeakPPS = result.StatOf(peaks).Median
	if row.SoftirqBusy, err = busy(); err != nil {
		return nil, err
	}
	for i := range c.engines {
		row.EngineCPUs = append(row.EngineCPUs, i%runtime.NumCPU())
	}
	after := feCounts(fePorts)
	for i := range after {
		row.PerEngine = append(row.PerEngine, after[i]-before[i])
	}
	if row.ReorderRatio, err = p.reorder(r.ctx, map[bool]int{true: 5000, false: 50000}[r.opt.Quick]); err != nil {
		return nil, err
	}
	secs := map[bool]string{true: "1", false: "3"}[r.opt.Quick]
	if row.TCPMbps, err = tcpMbps(pids["src"], pids["sink"], secs); err != nil {
		r.note("engines: %s: iperf3: %v", c, err)
	}
	if row.RTTUS, err = meanRTT(pids["src"]); err != nil {
		return nil, err
	}
	r.logf("   %-34s peak %8.0f pps  per engine %v  tcp %6.0f Mbit/s  reordered %.4f  rtt %.0f us  NET_RX busy per core %.2f\n",
		c, row.PeakPPS, row.PerEngine, row.TCPMbps, row.ReorderRatio, row.RTTUS, row.SoftirqBusy)
	return row, nil
}

// feCounts returns the frames each engine received so far (its substrate ends' tx).
func feCounts(fePorts []map[string]string) []uint64 {
	out := make([]uint64, len(fePorts))
	for i, m := range fePorts {
		for _, dev := range m {
			if l, err := netlink.LinkByName(dev); err == nil && l.Attrs().Statistics != nil {
				out[i] += l.Attrs().Statistics.TxPackets
			}
		}
	}
	return out
}

// nodeOutput runs a command in the node whose init is pid and returns its output.
func nodeOutput(pid int, argv ...string) (string, error) {
	cmd, err := noderuntime.Command(pid, argv...)
	if err != nil {
		return "", err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// tcpMbps runs one iperf3 stream from src to sink for secs seconds.
func tcpMbps(src, sink int, secs string) (float64, error) {
	if _, err := nodeOutput(sink, "iperf3", "-s", "-1", "-D"); err != nil {
		return 0, err
	}
	if err := waitListening(context.Background(), sink, 5201, 10*time.Second); err != nil {
		return 0, fmt.Errorf("iperf3 server: %w", err)
	}
	out, err := nodeOutput(src, "iperf3", "-c", "10.8.2.2", "-t", secs, "-J")
	if err != nil {
		return 0, err
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return 0, fmt.Errorf("iperf3 output: %w", err)
	}
	return res.End.SumReceived.BitsPerSecond / 1e6, nil
}

var rttRE = regexp.MustCompile(`= [0-9.]+/([0-9.]+)/`)

// meanRTT is ping's mean round trip from src to sink, in microseconds.
func meanRTT(src int) (float64, error) {
	out, err := nodeOutput(src, "ping", "-q", "-c", "200", "-i", "0.002", "10.8.2.2")
	if err != nil {
		return 0, err
	}
	m := rttRE.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no RTT in ping's output %q", out)
	}
	ms, _ := strconv.ParseFloat(m[1], 64)
	return ms * 1000, nil
}

// randomPrefixes returns n distinct random /24 prefixes outside 10.0.0.0/8 and the reserved
// ranges (a synthetic full table, the paper's setting).
func randomPrefixes(n int) []string {
	seen := map[uint32]bool{}
	out := make([]string, 0, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for len(out) < n {
		v := rng.Uint32N(1<<24) << 8
		a := v >> 24
		if a == 0 || a == 10 || a == 127 || a >= 224 || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, fmt.Sprintf("%d.%d.%d.0/24", a, v>>16&0xff, v>>8&0xff))
	}
	return out
}

// enginesProbe sends from src's eth1 towards sink through nut.
type enginesProbe struct {
	srcNS, sinkNS netns.NsHandle
	tx            *measure.TxPort
	flows, one    [][]byte
}

func openEnginesProbe(pids map[string]int) (p *enginesProbe, err error) {
	p = &enginesProbe{srcNS: -1, sinkNS: -1}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.srcNS, err = netns.GetFromPid(pids["src"]); err != nil {
		return nil, err
	}
	if p.sinkNS, err = netns.GetFromPid(pids["sink"]); err != nil {
		return nil, err
	}
	srcMAC, err := macOf(p.srcNS, "eth1")
	if err != nil {
		return nil, err
	}
	nutNS, err := netns.GetFromPid(pids["nut"])
	if err != nil {
		return nil, err
	}
	nutMAC, err := macOf(nutNS, "eth1")
	nutNS.Close()
	if err != nil {
		return nil, err
	}
	a := measure.FlowAddrs{SrcMAC: srcMAC, DstMAC: nutMAC, SrcIP: net.IPv4(10, 8, 1, 1), DstIP: net.IPv4(10, 8, 2, 2), SrcPort: 10000, DstPort: 9}
	if p.flows, err = measure.UDPFrames(a, 64, 64); err != nil {
		return nil, err
	}
	p.one = p.flows[:1]
	p.tx, err = measure.OpenTxPort(p.srcNS, "eth1")
	return p, err
}

func (p *enginesProbe) close() {
	if p.tx != nil {
		p.tx.Close()
	}
	for _, ns := range []netns.NsHandle{p.srcNS, p.sinkNS} {
		if ns >= 0 {
			ns.Close()
		}
	}
}

// peak offers as many frames as the generator can for dur, over 64 flows, and returns the
// rate that reached the sink's interface.
func (p *enginesProbe) peak(dur time.Duration) (float64, error) {
	before, err := rxPackets(p.sinkNS)
	if err != nil {
		return 0, err
	}
	p.tx.SetFrames(p.flows)
	g := &measure.Generator{Ports: []*measure.TxPort{p.tx}, CPU: -1}
	t0 := time.Now()
	if _, err := g.Run(0, dur); err != nil {
		return 0, err
	}
	time.Sleep(50 * time.Millisecond) // what is queued on the way arrives
	after, err := rxPackets(p.sinkNS)
	return float64(after-before) / time.Since(t0).Seconds(), err
}

// reorder sends n numbered frames of one flow and returns the RFC 4737 reordered ratio at the
// sink.
func (p *enginesProbe) reorder(ctx context.Context, n int) (float64, error) {
	frames, err := measure.SeqFrames(p.one[0], rand.Uint32(), n)
	if err != nil {
		return 0, err
	}
	t, err := measure.ProbeRouted(ctx, p.tx, p.sinkNS, "eth1", frames)
	if err != nil {
		return 0, err
	}
	if t.Arrived() == 0 {
		return 0, fmt.Errorf("none of %d numbered frames arrived", n)
	}
	return float64(t.Reordered) / float64(t.Arrived()), nil
}

// rxPackets is what the sink's eth1 has received.
func rxPackets(ns netns.NsHandle) (uint64, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	l, err := h.LinkByName("eth1")
	if err != nil {
		return 0, err
	}
	return l.Attrs().Statistics.RxPackets, nil
}
