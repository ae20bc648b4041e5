//go:build integration

package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/bench/report"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/testkit"
)

// TestQuickBench runs `trellis-bench --quick` as a user would and checks that every figure is
// sane: measured, positive, finite, output no more than input. It does not check that anything
// is fast: the machine may be busy with other work.
func TestQuickBench(t *testing.T) {
	testkit.RequireRoot(t)
	dir := t.TempDir()
	bin := buildBench(t, dir)
	tmp := filepath.Join(dir, "tmp") // the bench's work directory goes here, and must go again
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stateDir := filepath.Join(dir, "state") // the bench records its run here
	cmd := exec.Command(bin, "--state-dir", stateDir, "--quick", "--out", out, "--markdown", filepath.Join(out, "benchmarks.md"))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	t0 := time.Now()
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
	}
	took := time.Since(t0)
	t.Logf("trellis-bench --quick took %v:\n%s", took.Round(time.Second), output.String())
	if err != nil {
		t.Fatalf("trellis-bench --quick: %v", err)
	}
	if took > 2*time.Minute {
		t.Logf("warning: --quick took longer than two minutes (%v); the machine may be busy", took.Round(time.Second))
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the bench left its work directory behind: %v", left)
	}
	if left, _ := os.ReadDir(filepath.Join(stateDir, "bench")); len(left) > 0 {
		t.Errorf("the bench left its run record behind: %v", left)
	}
	// The simulated machines of the tunnel setups are named trbenchPID-NONCE-mX.
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		if prefix := fmt.Sprintf("trbench%d-", cmd.Process.Pid); strings.Contains(string(out), prefix) {
			t.Errorf("the bench left simulated machines behind:\n%s", out)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep result.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("bench.json: %v", err)
	}
	checkReport(t, &rep)
	for _, f := range append(report.PlotsOf(&rep), "benchmarks.md") {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written (%v)", f, err)
		}
	}
}

// buildBench builds trellis-bench and, beside it, the trellis binary it runs into dir, and
// returns trellis-bench's path.
func buildBench(t *testing.T, dir string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"trellis", "trellis-bench"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", name, err, out)
		}
	}
	return filepath.Join(dir, "trellis-bench")
}

func checkReport(t *testing.T, rep *result.Report) {
	t.Helper()
	positive := func(what string, v float64) {
		t.Helper()
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s = %v, want a positive finite figure", what, v)
		}
	}
	stat := func(what string, s result.Stat) {
		t.Helper()
		positive(what+" median", s.Median)
		if s.Min > s.Median || s.Median > s.Max {
			t.Errorf("%s: min %v, median %v, max %v out of order", what, s.Min, s.Median, s.Max)
		}
	}
	if rep.Machine.Cores < 1 || rep.Machine.Kernel == "" || rep.Machine.CPUModel == "" {
		t.Errorf("machine not described: %+v", rep.Machine)
	}
	if rep.Generator == nil {
		t.Fatal("no generator ceiling")
	}
	stat("generator offered", rep.Generator.Offered)
	stat("generator delivered", rep.Generator.Delivered)
	want := map[string]bool{"native": true, "shortbridge": true, "bridge": true, "lan": true, "userspace": true, "egre-shortbridge": true, "egre-bridge": true, "egre3-shortbridge": true, "vxlan": true}
	for _, s := range rep.Setups {
		delete(want, s.Name)
		stat(s.Name+" peak", s.Peak)
		stat(s.Name+" zero-loss", s.ZeroLoss)
		if s.PeakRatio == nil || s.ZeroLossRatio == nil {
			t.Errorf("%s: no ratio to native", s.Name)
		} else {
			stat(s.Name+" peak ratio", *s.PeakRatio)
			if s.Name == "native" && s.PeakRatio.Median != 1 {
				t.Errorf("native's ratio to itself is %v", s.PeakRatio.Median)
			}
		}
		if len(s.Sweeps) != rep.Config.Repeat {
			t.Errorf("%s: %d sweeps, want %d", s.Name, len(s.Sweeps), rep.Config.Repeat)
		}
		for _, sw := range s.Sweeps {
			for _, tr := range sw {
				positive(s.Name+" trial input", tr.In)
				// The sink counts only frames of the trial (they carry its number), so no
				// frame is counted that the generator did not send in it.
				if tr.Out < 0 || tr.Out > tr.In {
					t.Errorf("%s: output %.0f pps for input %.0f pps", s.Name, tr.Out, tr.In)
				}
			}
		}
	}
	for name := range want {
		t.Errorf("setup %s not measured", name)
	}
	if len(rep.CPU) == 0 && rep.Config.ForwardingCPU >= 0 {
		t.Error("no CPU cost")
	}
	cpuSetups := map[string]bool{}
	for _, c := range rep.CPU {
		cpuSetups[c.Setup] = true
		// NET_RX softirq time per frame: positive and finite; less the sink's share it may come
		// out near zero or below in a noisy trial, never above the raw figure.
		if len(c.Raw.Values) == 0 || c.Raw.Min <= 0 || math.IsInf(c.Raw.Max, 0) || math.IsNaN(c.Net.Median) || c.Net.Median > c.Raw.Max {
			t.Errorf("%s: CPU ns per frame %v (raw %+v)", c.Setup, c.Net.Median, c.Raw)
		}
		// Nobody forwards a frame in less than 50 ns or takes a millisecond over it.
		if c.Raw.Median < 50 || c.Raw.Median > 1e6 {
			t.Errorf("%s: %.0f ns of CPU per frame is not a sane figure", c.Setup, c.Raw.Median)
		}
		positive(c.Setup+" CPU rate", c.RatePPS)
		if len(c.Busy.Values) == 0 || len(c.Other.Values) == 0 {
			t.Errorf("%s: no busy or other-CPU figures", c.Setup)
		}
		tunnel := strings.HasPrefix(c.Setup, "egre") || c.Setup == "vxlan"
		if c.NodeMachineOnly != tunnel {
			t.Errorf("%s: node_machine_only is %v", c.Setup, c.NodeMachineOnly)
		}
		if tunnel && !(c.Other.Median > 0) {
			t.Errorf("%s: machine A's share (other CPUs) is %v, want it measured", c.Setup, c.Other.Median)
		}
		if (c.Setup == "userspace") != (c.Relay != nil) {
			t.Errorf("%s: relay figure %v", c.Setup, c.Relay)
		} else if c.Relay != nil && !(c.Relay.Median > 0 && c.Relay.Median <= c.Raw.Max) {
			t.Errorf("userspace: relay %v ns per frame of %v", c.Relay.Median, c.Raw.Max)
		}
	}
	if rep.Config.ForwardingCPU >= 0 {
		for _, s := range rep.Setups {
			if !cpuSetups[s.Name] {
				t.Errorf("no CPU cost for %s", s.Name)
			}
		}
	}
	if _, err := exec.LookPath("perf"); err == nil && rep.Config.ForwardingCPU >= 0 {
		profiled := map[string]*result.ProfileResult{}
		for _, p := range rep.Profiles {
			profiled[p.Setup] = p
			if p.Samples <= 0 || p.Frames <= 0 || len(p.Symbols) == 0 || len(p.Groups) == 0 {
				t.Errorf("profile of %s is empty: %+v", p.Setup, p)
			}
			sum := 0.0
			for _, g := range p.Groups {
				sum += g.Percent
			}
			if math.Abs(sum-100) > 0.5 {
				t.Errorf("profile of %s: groups add up to %.1f%%", p.Setup, sum)
			}
		}
		for _, s := range []string{"shortbridge", "bridge", "lan"} {
			if profiled[s] == nil {
				t.Errorf("%s not profiled", s)
			}
		}
		if p := profiled["bridge"]; p != nil && !hasGroup(p, "Linux bridge") {
			t.Errorf("the bridge profile has no Linux bridge in it: %+v", p.Groups)
		}
		// perf samples the whole machine while every setup's network exists, the bridge setup's
		// too (its nodes' own traffic, e.g. IPv6 neighbour discovery, crosses its bridge): a
		// stray sample there is not a shortbridge frame, every one of which would cross a
		// bridge if the path had one (tens of percent). One run showed 1 sample of 777.
		if p := profiled["shortbridge"]; p != nil && (!hasGroup(p, "eBPF programs, tc, redirect") || groupShare(p, "Linux bridge") >= 1) {
			t.Errorf("the shortbridge profile: %+v", p.Groups)
		}
		if p := profiled["lan"]; p != nil && (!hasGroup(p, "eBPF programs, tc, redirect") || hasGroup(p, "Linux bridge")) {
			t.Errorf("the lan profile: %+v", p.Groups)
		}
	}
	if len(rep.Sizes) == 0 {
		t.Error("no frame sizes")
	}
	for _, s := range rep.Sizes {
		stat(s.Setup+" peak at size", s.Peak)
	}
	if len(rep.Scaling) == 0 {
		t.Error("no scaling")
	}
	for _, s := range rep.Scaling {
		stat("scaling aggregate", s.Aggregate)
		if s.Ratio == nil {
			t.Error("scaling: no ratio")
		} else {
			stat("scaling ratio", *s.Ratio)
		}
		positive("scaling offered", s.Offered)
		if _, err := exec.LookPath("perf"); err == nil && rep.Config.ForwardingCPU >= 0 {
			if s.Profile == nil || s.Profile.Samples <= 0 || len(s.Profile.Groups) == 0 {
				t.Errorf("scaling, %d networks: no profile (%+v)", s.Networks, s.Profile)
			}
		}
	}
	if _, err := exec.LookPath("iperf3"); err == nil && len(rep.Isolation) == 0 {
		t.Error("no isolation rows")
	}
	for _, r := range rep.Isolation {
		if r.Flow2Loss.Median < 0 || r.Flow2Loss.Median > 100 || r.Flow2Jitter.Median < 0 || r.CPUPercent < 0 || r.CPUPercent > 101 {
			t.Errorf("isolation row out of range: %+v", r)
		}
	}
	var tools []string
	for _, d := range rep.Deploy {
		stat(d.Tool+" up", d.Up)
		stat(d.Tool+" down", d.Down)
		tools = append(tools, d.Tool)
	}
	if !strings.Contains(strings.Join(tools, ","), "trellis") {
		t.Error("no deploy figures for trellis")
	}
	checkApply(t, rep, stat)
	checkImpair(t, rep)
	checkDelay(t, rep)
	checkVM(t, rep, stat)
	checkEngines(t, rep)
}

// checkApply: every change of the apply part was timed in every repetition, and up changed
// what the change says (the part checks each repetition; the report keeps the first).
func checkApply(t *testing.T, rep *result.Report, stat func(string, result.Stat)) {
	t.Helper()
	a := rep.Apply
	if a == nil {
		t.Error("no apply figures")
		return
	}
	if a.Nodes != QuickOptions().ApplyNodes || !(a.BuildSeconds > 0) {
		t.Errorf("apply: chain of %d nodes built in %v s", a.Nodes, a.BuildSeconds)
	}
	var changes []string
	for _, s := range a.Steps {
		changes = append(changes, s.Change)
		stat("apply "+s.Change, s.Seconds)
		if len(s.Seconds.Values) != rep.Config.Repeat {
			t.Errorf("apply %s: %d times, want %d", s.Change, len(s.Seconds.Values), rep.Config.Repeat)
		}
		if (s.Change == ApplyUnchanged) != (len(s.Applied) == 0) {
			t.Errorf("apply %s: up changed %v", s.Change, s.Applied)
		}
	}
	if want := []string{ApplyUnchanged, ApplyRate, ApplyAddNode, ApplyRemove}; strings.Join(changes, ",") != strings.Join(want, ",") {
		t.Errorf("apply steps %v, want %v", changes, want)
	}
}

// checkImpair: every impairment was measured, and what the link delivered is the configured
// impairment within what chance allows over the quick run's frames (5 standard deviations of
// a binomial count, and at least 0.3 points; correlated loss has (1+C)/(1-C) times the
// variance, C being the chance that a frame repeats the previous frame's fate); the path
// itself loses nothing.
func checkImpair(t *testing.T, rep *result.Report) {
	t.Helper()
	im := rep.Impair
	if im == nil {
		t.Error("no impair figures")
		return
	}
	if len(im.Rows) != len(Impairments) || im.Frames != QuickOptions().ImpairFrames {
		t.Fatalf("impair: %d rows over %d frames", len(im.Rows), im.Frames)
	}
	near := func(what string, got result.Stat, want, corr float64) {
		t.Helper()
		p, c := want/100, corr/100
		tol := max(0.3, 5*100*math.Sqrt(p*(1-p)*(1+c)/(1-c)/float64(im.Frames)))
		if len(got.Values) != rep.Config.Repeat || got.Min < want-tol || got.Max > want+tol {
			t.Errorf("impair %s: delivered %v %%, configured %v %% (± %.2f)", what, got.Values, want, tol)
		}
	}
	for _, r := range im.Rows {
		near(r.Config+" loss", r.GotLoss, r.Loss, r.LossCorrelation)
		near(r.Config+" duplicate", r.GotDuplicate, r.Duplicate, 0)
		near(r.Config+" corrupt", r.GotCorrupt, r.Corrupt, 0)
		if (r.GotBurst != nil) != (r.Loss > 0) {
			t.Errorf("impair %s: burst %v", r.Config, r.GotBurst)
		}
	}
	if !strings.Contains(im.Delay, "the delay part") {
		t.Errorf("impair: delay note %q", im.Delay)
	}
}

// checkDelay: every delay row was measured, nothing was lost, no frame was delayed less than
// asked and the median is within half a millisecond above it (the jitter row's median within
// a standard error's five times); the ceiling was measured with and without a delay.
func checkDelay(t *testing.T, rep *result.Report) {
	t.Helper()
	d := rep.Delay
	if d == nil {
		t.Error("no delay figures")
		return
	}
	if len(d.Rows) != len(QuickOptions().DelayRates)*len(DelayConfigs) || d.Frames != QuickOptions().DelayFrames || d.Way == "" {
		t.Fatalf("delay: %d rows over %d frames, way %q", len(d.Rows), d.Frames, d.Way)
	}
	for _, r := range d.Rows {
		tol := 0.5
		if r.Jitter > 0 {
			tol = 5 * r.Jitter / math.Sqrt(float64(d.Frames))
		}
		if r.Lost > 0 || r.Median < r.Delay-tol || r.Median > r.Delay+tol || (r.Jitter == 0 && r.Median < r.Delay) {
			t.Errorf("delay %s %s: median %.3f ms, %d lost", r.Rate, r.Config, r.Median, r.Lost)
		}
	}
	if c := d.Ceiling; c == nil || c.PlainKpps <= 0 || c.DelayKpps <= 0 {
		t.Errorf("delay: ceiling %+v", c)
	}
}

func hasGroup(p *result.ProfileResult, name string) bool {
	return groupShare(p, name) > 0
}

// groupShare is the percentage of profile p's samples in group name.
func groupShare(p *result.ProfileResult, name string) float64 {
	for _, g := range p.Groups {
		if g.Name == name {
			return g.Percent
		}
	}
	return 0
}

// checkVM: a VM node booted, and frames crossed a VM node under each quick setting, which its
// vCPU threads forwarded.
func checkVM(t *testing.T, rep *result.Report, stat func(string, result.Stat)) {
	t.Helper()
	v := rep.VM
	if v == nil {
		t.Fatal("no vm figures")
	}
	stat("vm boot seconds", v.BootSeconds)
	if v.Functional != (v.Accel != "kvm") {
		t.Errorf("vm: accel %s, functional %v", v.Accel, v.Functional)
	}
	if len(v.Knobs) != 2 {
		t.Fatalf("vm: %d knob settings measured, want the quick run's 2", len(v.Knobs))
	}
	for _, k := range v.Knobs {
		stat("vm "+k.Knob+" peak", k.Peak)
		if !(k.CPU["vcpu"] > 0) {
			t.Errorf("vm %s: the vCPU threads used %v cores while frames crossed", k.Knob, k.CPU["vcpu"])
		}
	}
	if v.Knobs[1].PeakRatio == nil {
		t.Errorf("vm %s: no ratio to the defaults", v.Knobs[1].Knob)
	}
}
