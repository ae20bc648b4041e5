//go:build integration

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestMain lets the test binary run commands in nodes (noderuntime.JoinArg), as trellis does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == noderuntime.JoinArg {
		noderuntime.JoinMain(os.Args[2:])
	}
	os.Exit(m.Run())
}

// TestRootPortsCost is the scaling cliff's control experiment (issue 16, item 4): one
// shortbridge network, measured alone, then with as many idle ports in the root namespace as
// 1024 networks have (TRELLIS_ROOT_PORTS, default 4096: veth ends whose peers sit in a
// namespace of the test's own), then alone again. If the per-frame cost grows with the root
// namespace's devices alone, the cliff is there (the ifindex lookups of the redirects walk
// hash chains of NETDEV_HASHENTRIES = 256 buckets). It runs only when TRELLIS_ROOT_PORTS is
// set: it measures, it does not judge (the machine may be loaded), and it takes a minute.
// The measured network's ports are where TRELLIS_PORT_NETNS puts them: in a namespace of its
// own by default (the cliff's remedy), in the root namespace with TRELLIS_PORT_NETNS=root (the
// cliff itself).
func TestRootPortsCost(t *testing.T) {
	nIdle, err := strconv.Atoi(os.Getenv("TRELLIS_ROOT_PORTS"))
	if err != nil || nIdle <= 0 {
		testkit.Skip(t, "opt-in: set TRELLIS_ROOT_PORTS=N (e.g. 4096) to run this experiment")
	}
	testkit.RequireRoot(t)
	h, err := setup.Open(t.TempDir(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.Substrate.PortNS = os.Getenv(substrate.PortNSEnv)
	g := h.NewRig(spec.Shortbridge)
	defer func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := h.AddTrellisNet(g, "bench-rootports-0", spec.Shortbridge, false); err != nil {
		t.Fatal(err)
	}
	g.Nets = 1
	x := newExperiment(t, h, g)
	phase := x.phase
	phase("alone")
	peers, err := addIdlePorts(nIdle)
	if err != nil {
		t.Fatal(err)
	}
	phase(fmt.Sprintf("with %d idle root ports", nIdle))
	peers.Close() // the namespace goes, and with it every pair
	for i := 0; i < 100 && countIdle() > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	phase("alone again")
	nets, _ := strconv.Atoi(os.Getenv("TRELLIS_TRELLIS_NETS"))
	if nets <= 1 {
		return
	}
	t0 := time.Now()
	for g.Nets < nets {
		if err := h.AddTrellisNet(g, fmt.Sprintf("bench-rootports-%d", g.Nets), spec.Shortbridge, false); err != nil {
			t.Fatal(err)
		}
		g.Nets++
	}
	t.Logf("%d networks built in %.1fs", nets, time.Since(t0).Seconds())
	phase(fmt.Sprintf("x%d", nets))
	if more := nIdle - 4*nets; more > 0 {
		peers, err := addIdlePorts(more)
		if err != nil {
			t.Fatal(err)
		}
		defer peers.Close()
		phase(fmt.Sprintf("x%d with %d idle root ports", nets, more))
	}
}

// experiment measures one rig in phases: its peak (three times) and a profile at 70% of the
// first phase's peak, so that the profiles compare at one rate.
type experiment struct {
	t    *testing.T
	g    *setup.Rig
	prof *measure.Profiler
	rate float64
	fwd  int
}

func newExperiment(t *testing.T, h *setup.Harness, g *setup.Rig) *experiment {
	x := &experiment{t: t, g: g, fwd: h.FwdCPU}
	if perf, err := exec.LookPath("perf"); err == nil {
		x.prof = &measure.Profiler{Perf: perf, Dir: h.Work, GenCPU: h.GenCPU, FwdCPU: h.FwdCPU}
	}
	return x
}

func (x *experiment) phase(name string) {
	ctx := context.Background()
	if err := x.g.SetFrames(64, 1); err != nil {
		x.t.Fatal(err)
	}
	if _, err := x.g.Trial(ctx, 0, warmup); err != nil {
		x.t.Fatal(err)
	}
	var peaks []float64
	for rep := 0; rep < 3; rep++ {
		p, err := peakOf(ctx, x.g, 500*time.Millisecond)
		if err != nil {
			x.t.Fatal(err)
		}
		peaks = append(peaks, p)
	}
	st := result.StatOf(peaks)
	if x.rate == 0 {
		x.rate = 0.7 * st.Median
	}
	x.t.Logf("%s: peak %.0f (%.0f–%.0f) kpps", name, st.Median/1e3, st.Min/1e3, st.Max/1e3)
	x.cpu(name)
	if x.prof == nil {
		return
	}
	res, err := x.prof.Profile(ctx, "x-"+strings.ReplaceAll(name, " ", "-"), &x.g.Traffic, x.rate, time.Second)
	if err != nil {
		x.t.Logf("%s: profile: %v", name, err)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: profile at %.0f kpps, %d samples, %.0f frames\n", name, x.rate/1e3, res.Samples, res.Frames)
	for _, r := range res.Groups {
		fmt.Fprintf(&b, "   group %-40s %5.1f%% %6.0f ns/frame\n", r.Name, r.Percent, r.NSPerFrame)
	}
	for _, r := range res.Symbols {
		fmt.Fprintf(&b, "   sym   %-40s %5.1f%% %6.0f ns/frame\n", r.Name, r.Percent, r.NSPerFrame)
	}
	x.t.Log(b.String())
}

// cpu logs the forwarding CPU's NET_RX time per frame delivered at the experiment's rate, five
// trials (the bench's CPU cost part's measure, which other processes on the CPU do not inflate).
func (x *experiment) cpu(name string) {
	meter, err := measure.NewSoftirqMeter()
	if err != nil {
		x.t.Logf("%s: no softirq meter: %v", name, err)
		return
	}
	defer meter.Close()
	var per []float64
	for i := 0; i < 5; i++ {
		s0, err := meter.Read()
		if err != nil {
			x.t.Fatal(err)
		}
		tr, err := x.g.Trial(context.Background(), x.rate, 500*time.Millisecond)
		if err != nil {
			x.t.Fatal(err)
		}
		s1, err := meter.Read()
		if err != nil {
			x.t.Fatal(err)
		}
		ns, _ := s1.Since(s0, x.fwd, measure.SoftirqNetRX)
		per = append(per, float64(ns)/float64(max(tr.Frames, 1)))
	}
	st := result.StatOf(per)
	x.t.Logf("%s: NET_RX %.0f (%.0f–%.0f) ns per frame at %.0f kpps", name, st.Median, st.Min, st.Max, x.rate/1e3)
}

// TestNativeScalingCost is the cliff's second control: N native networks (TRELLIS_NATIVE_NETS,
// e.g. 1024; no trellis, no device in the root namespace) against one, then with 4N idle root
// ports. A cliff here is the generator's or the kernel's forwarding's, not trellis's.
func TestNativeScalingCost(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("TRELLIS_NATIVE_NETS"))
	if err != nil || n <= 1 {
		testkit.Skip(t, "opt-in: set TRELLIS_NATIVE_NETS=N (e.g. 1024) to run this experiment")
	}
	testkit.RequireRoot(t)
	h, err := setup.Open(t.TempDir(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	g := h.NewRig("native")
	defer func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := h.AddNativeNet(g); err != nil {
		t.Fatal(err)
	}
	x := newExperiment(t, h, g)
	x.phase("native x1")
	t0 := time.Now()
	for g.Nets < n {
		if err := h.AddNativeNet(g); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d native networks built in %.1fs", n, time.Since(t0).Seconds())
	x.phase(fmt.Sprintf("native x%d", n))
	peers, err := addIdlePorts(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer peers.Close()
	x.phase(fmt.Sprintf("native x%d with %d idle root ports", n, 4*n))
}

// peakOf is the best output of a full-rate trial and trials at fractions of its input.
func peakOf(ctx context.Context, g *setup.Rig, dur time.Duration) (float64, error) {
	full, err := g.Trial(ctx, 0, dur)
	if err != nil {
		return 0, err
	}
	best := full.Out
	for _, f := range []float64{0.6, 0.8, 0.9} {
		tr, err := g.Trial(ctx, f*full.In, dur)
		if err != nil {
			return 0, err
		}
		best = max(best, tr.Out)
	}
	return best, nil
}

// addIdlePorts adds n veth pairs whose one end is in the root namespace and the other in a new
// namespace, returned: closing it removes them all at once. On error nothing is left.
func addIdlePorts(n int) (netns.NsHandle, error) {
	ns, err := netnsutil.New()
	if err != nil {
		return netns.None(), err
	}
	t0 := time.Now()
	for i := 0; i < n; i++ {
		la := netlink.NewLinkAttrs()
		la.Name = fmt.Sprintf("trrp%d", i)
		v := &netlink.Veth{LinkAttrs: la, PeerName: fmt.Sprintf("trrq%d", i), PeerNamespace: netlink.NsFd(int(ns))}
		if err := netlink.LinkAdd(v); err != nil {
			ns.Close() // and with it the pairs made so far
			return netns.None(), fmt.Errorf("idle port %d: %w", i, err)
		}
	}
	fmt.Fprintf(os.Stderr, "   %d idle root ports added in %.1fs\n", n, time.Since(t0).Seconds())
	return ns, nil
}

// countIdle counts the idle ports left in the root namespace.
func countIdle() int {
	l, err := netlink.LinkList()
	if err != nil {
		return 0
	}
	n := 0
	for _, d := range l {
		if strings.HasPrefix(d.Attrs().Name, "trrp") {
			n++
		}
	}
	return n
}
