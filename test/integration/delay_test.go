//go:build integration

package integration

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/delay"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// delayTopo is two nodes and one link whose keys are extra (link level, or under from:).
func delayTopo(extra string) string {
	return `name: dly
nodes:
  a:
    addresses: {eth1: [10.0.1.1/24]}
    sysctl: {net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
  b:
    addresses: {eth1: [10.0.1.2/24]}
    sysctl: {net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
links:
  - endpoints: [a:eth1, b:eth1]
` + extra
}

// delayProbe sends numbered, time-stamped UDP frames from one node's eth1 to the other's.
type delayProbe struct {
	tx   *measure.TxPort
	txNS netns.NsHandle
	rxNS netns.NsHandle
	base map[int][]byte // by frame size
	addr measure.FlowAddrs
}

// close lets go of the nodes' namespaces (before the host is checked: the test's own
// descriptors holding a namespace count as left behind).
func (p *delayProbe) close() {
	for _, ns := range []*netns.NsHandle{&p.txNS, &p.rxNS} {
		if ns.IsOpen() {
			ns.Close()
		}
	}
}

func openDelayProbe(t *testing.T, state, from, to string) *delayProbe {
	t.Helper()
	pids := inspect(t, state, "dly").pids()
	p := &delayProbe{base: map[int][]byte{}, txNS: -1, rxNS: -1}
	t.Cleanup(p.close)
	var err error
	if p.txNS, err = netns.GetFromPid(pids[from]); err != nil {
		t.Fatal(err)
	}
	if p.rxNS, err = netns.GetFromPid(pids[to]); err != nil {
		t.Fatal(err)
	}
	if p.tx, err = measure.OpenTxPort(p.txNS, "eth1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.tx.Close)
	src, dst := nodeMAC(t, pids[from]), nodeMAC(t, pids[to])
	ip := map[string]net.IP{"a": net.IPv4(10, 0, 1, 1), "b": net.IPv4(10, 0, 1, 2)}
	p.addr = measure.FlowAddrs{SrcMAC: src, DstMAC: dst, SrcIP: ip[from], DstIP: ip[to], SrcPort: 10000, DstPort: 9}
	return p
}

// run sends n frames of size bytes, one every gap, and returns the delays of those that arrived.
func (p *delayProbe) run(t *testing.T, n, size int, gap time.Duration) ([]time.Duration, int) {
	t.Helper()
	if p.base[size] == nil {
		f, err := measure.UDPFrames(p.addr, size, 1)
		if err != nil {
			t.Fatal(err)
		}
		p.base[size] = f[0]
	}
	run, err := measure.OneWay(context.Background(), p.tx, p.rxNS, "eth1", p.base[size], n, gap)
	if err != nil {
		t.Fatal(err)
	}
	return run.Delays, run.Lost
}

func nodeMAC(t *testing.T, pid int) net.HardwareAddr {
	t.Helper()
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName("eth1")
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().HardwareAddr
}

// Tolerances of delivered against configured delay, for a path on this machine with nothing
// else queued: the frame's own way through the veths and programs (tens of µs) and the wake-up
// of whatever holds it (netem's hrtimer, or the delay line's real-time thread) come on top of
// the delay; nothing may come out early.
const (
	delayMedianSlack = 300 * time.Microsecond
	delayP99Slack    = 2 * time.Millisecond
)

// TestDelay: delay applied per direction at 1, 10 and 100 ms (changed live with up), its
// jitter's distribution (set live with `trellis link set`), delay with a rate and a loss, a
// delay line killed and started again by up, and nothing left after down. On a kernel without
// netem it runs trellis's delay line; with TRELLIS_DELAY=line it runs the line on any kernel.
// Under software emulation (TestGuestKernel with TRELLIS_GUEST_DELAY=1: netem in Debian's 6.1)
// it checks what the emulator's late timers cannot fake, and logs the figures.
func TestDelay(t *testing.T) {
	e := start(t)
	path := writeTopo(t, delayTopo("    from:\n      a:eth1: {delay: 1ms}\n"))
	way := "netem"
	if !netemKernel() || os.Getenv("TRELLIS_DELAY") == "line" {
		way = "trellis's delay line"
	}
	// up -v prints on stderr how the machine delays frames and how long each step took.
	out, verbose, err := trellis(t, e.state, "up", "-v", path)
	if err != nil {
		t.Fatalf("trellis up -v: %v\n%s%s", err, out, verbose)
	}
	for _, want := range []string{"\ndelay and jitter by " + way, "\n2 nodes started in ", "\n1 links made or changed in "} {
		if !strings.Contains("\n"+verbose, want) {
			t.Errorf("up -v printed on stderr:\n%s\nwant a line starting %q", verbose, want[1:])
		}
	}
	if d := mustTrellis(t, e.state, "diff", path); !strings.Contains(d, "no changes") {
		t.Errorf("diff after up: %s", d)
	}
	rewriteTopo(t, path, delayTopo("    from:\n      a:eth1: {delay: 2ms}\n"))
	if d := mustTrellis(t, e.state, "diff", path); !strings.Contains(d, "delay and jitter by "+way) {
		t.Errorf("diff does not say the delay is applied by %s:\n%s\n(up said %s)", way, d, out)
	}
	ab := openDelayProbe(t, e.state, "a", "b")
	ba := openDelayProbe(t, e.state, "b", "a")
	pids := inspect(t, e.state, "dly").pids()
	// In a guest under software emulation (TestGuestKernel's, timeScale above 1) timers fire
	// late by up to tens of milliseconds, so the emulator, not the delay, sets the medians,
	// tails and spreads: there only what lateness cannot fake is checked (nothing early,
	// nothing lost, the other direction not delayed, jitter sending frames before the mean)
	// and the figures are logged.
	exact := timeScale() == 1

	for _, c := range []struct {
		delay time.Duration
		n     int
		gap   time.Duration
	}{{time.Millisecond, 500, time.Millisecond}, {10 * time.Millisecond, 300, 2 * time.Millisecond}, {100 * time.Millisecond, 200, 5 * time.Millisecond}} {
		rewriteTopo(t, path, delayTopo(fmt.Sprintf("    from:\n      a:eth1: {delay: %v}\n", c.delay)))
		mustTrellis(t, e.state, "up", path) // a live change
		// A p99 above its bound is measured once more before it counts (the project's rule
		// for timing under load: a machine shared by many stalls now and then).
		for try := 1; ; try++ {
			d, lost := ab.run(t, c.n, 64, c.gap)
			s := measure.StatsOf(d)
			t.Logf("delay %v (%s): a->b median %v p99 %v min %v over %d frames, %d lost", c.delay, way, s.Median, s.P99, s.Min, s.N, lost)
			if lost > 0 || s.Min < c.delay || (exact && s.Median > c.delay+delayMedianSlack) {
				t.Errorf("delay %v: median %v, min %v, %d lost; want min >= %v, median <= +%v, none lost",
					c.delay, s.Median, s.Min, lost, c.delay, delayMedianSlack)
			}
			if !exact || s.P99 <= c.delay+delayP99Slack {
				break
			}
			if try == 2 {
				t.Errorf("delay %v: p99 %v twice; want <= +%v", c.delay, s.P99, delayP99Slack)
				break
			}
		}
		back := measure.StatsOf(first(ba.run(t, 100, 64, time.Millisecond)))
		if (exact && back.Median > delayMedianSlack) || back.Min >= c.delay {
			t.Errorf("delay %v from a: b->a (not delayed) median %v, min %v", c.delay, back.Median, back.Min)
		}
	}

	// Jitter, normal: the mean and standard deviation of n delays, within 4 standard errors
	// (the standard error of a sample's standard deviation is sigma/sqrt(2n) for a normal one),
	// and the share within one sigma of the mean (68.27%, binomial standard error).
	const n, mu, sigma = 3000, 20 * time.Millisecond, 4 * time.Millisecond
	mustTrellis(t, e.state, "link", "dly", "a:eth1--b:eth1", "set", "delay=20ms", "jitter=4ms", "distribution=normal", "--endpoint", "a:eth1")
	seMean := float64(sigma) / math.Sqrt(n)
	seSD := float64(sigma) / math.Sqrt(2*n)
	seShare := math.Sqrt(0.6827 * (1 - 0.6827) / n)
	for try := 1; ; try++ { // measured once more before a failure counts, as above
		d, lost := ab.run(t, n, 64, 500*time.Microsecond)
		s := measure.StatsOf(d)
		within := 0
		for _, x := range d {
			if x > mu-sigma && x < mu+sigma {
				within++
			}
		}
		share := float64(within) / float64(len(d))
		if !exact {
			// 30.85% of a normal distribution lies below mu-sigma/2, and nothing without jitter
			// (nothing leaves early); late timers move frames later only, so well below 30%
			// are seen there (9% in one run), but not none.
			early := 0
			for _, x := range d {
				if x < mu-sigma/2 {
					early++
				}
			}
			t.Logf("emulated: %d of %d frames before mu-sigma/2 (normal: 30.85%%), %d lost; mean %v sd %v p99 %v", early, len(d), lost, s.Mean, s.SD, s.P99)
			if lost > 0 || early < len(d)/100 {
				t.Errorf("normal jitter: %d of %d frames before %v (want at least 1%%), %d lost", early, len(d), mu-sigma/2, lost)
			}
			break
		}
		t.Logf("delay 20ms jitter 4ms normal (%s): mean %v sd %v, %.2f%% within one sigma, p99 %v, over %d frames (%d lost)", way, s.Mean, s.SD, 100*share, s.P99, s.N, lost)
		ok := lost == 0 && math.Abs(float64(s.Mean-mu)) <= 4*seMean+float64(delayMedianSlack) &&
			math.Abs(float64(s.SD-sigma)) <= 4*seSD && math.Abs(share-0.6827) <= 4*seShare
		if ok {
			break
		}
		if try == 2 {
			t.Errorf("normal jitter: mean %v (want %v ± %v), sd %v (want %v ± %v), %.2f%% within one sigma (want 68.27 ± %.2f), %d lost",
				s.Mean, mu, time.Duration(4*seMean)+delayMedianSlack, s.SD, sigma, time.Duration(4*seSD), 100*share, 400*seShare, lost)
			break
		}
	}

	// With a rate and a loss (from the file): the loss as asked, the delay of a lone frame as
	// asked, and a burst of full frames leaving at the rate after the delay: the delay first,
	// then the rate's queue, as Mininet's netem under a tbf or htb class does.
	rewriteTopo(t, path, delayTopo("    rate: 10mbit\n    from:\n      a:eth1: {delay: 10ms, loss: 10%}\n"))
	mustTrellis(t, e.state, "up", path)
	d, lost := ab.run(t, 2000, 64, 500*time.Microsecond)
	s := measure.StatsOf(d)
	loss := float64(lost) / 2000
	t.Logf("10mbit, delay 10ms, loss 10%%: median %v p99 %v, loss %.2f%%", s.Median, s.P99, 100*loss)
	if math.Abs(loss-0.1) > 4*math.Sqrt(0.1*0.9/2000) || s.Min < 10*time.Millisecond || (exact && s.Median > 10*time.Millisecond+delayMedianSlack) {
		t.Errorf("10mbit, delay 10ms, loss 10%%: loss %.2f%%, median %v, min %v", 100*loss, s.Median, s.Min)
	}
	time.Sleep(100 * time.Millisecond) // the rate's bucket fills again
	d, _ = ab.run(t, 60, 1514, 0)
	s = measure.StatsOf(d)
	// The bucket lets 25000 bytes through at once (20 ms at 10mbit: substrate/shaper.go); the
	// rest leave at the rate.
	want := 10*time.Millisecond + time.Duration(float64(len(d)*1514-25000)*8/10e6*float64(time.Second))
	last := d[len(d)-1]
	t.Logf("burst of %d full frames over 10mbit with delay 10ms: last after %v (want %v)", len(d), last, want)
	// Under emulation the sender's own pace spreads the burst (each delay is from its frame's
	// send): there only the first frame's delay is checked.
	if (exact && (last < want-want/10 || last > want+want/10+delayP99Slack)) || d[0] < 10*time.Millisecond {
		t.Errorf("burst: first after %v, last after %v; want the first after 10ms and the last after %v ± 10%%", d[0], last, want)
	}

	if way != "netem" {
		lines, err := delay.Lines(stateID(t, e.state), netIDOf(t, e.state, "dly"))
		if err != nil || len(lines) != 1 {
			t.Fatalf("delay lines running: %v %v, want 1", lines, err)
		}
		for _, m := range lines {
			syscall.Kill(m.PID, syscall.SIGKILL) // a line of this test's network, by its pid
		}
		if d := mustTrellis(t, e.state, "diff", path); !strings.Contains(d, "delay line is not running") {
			t.Errorf("diff does not say the killed delay line is missing:\n%s", d)
		}
		mustTrellis(t, e.state, "up", path)
		if d, lost := ab.run(t, 50, 64, time.Millisecond); len(d) == 0 || measure.StatsOf(d).Median < 10*time.Millisecond {
			t.Errorf("after up started the killed line again: %d frames arrived (%d lost), median %v", len(d), lost, measure.StatsOf(d).Median)
		}
	}
	if got := inspect(t, e.state, "dly").pids(); !mapsEqual(got, pids) {
		t.Errorf("node processes changed: %v -> %v", pids, got)
	}
	mustTrellis(t, e.state, "down", "dly")
	ab.close()
	ba.close()
	e.assertClean()
}

func first(d []time.Duration, _ int) []time.Duration { return d }

// stateID and netIDOf read a state directory's id and a network's id from its files.
func stateID(t *testing.T, state string) string {
	t.Helper()
	data, err := os.ReadFile(state + "/id")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func netIDOf(t *testing.T, state, network string) string {
	t.Helper()
	for _, l := range inspect(t, state, network).Links {
		for _, e := range l.Endpoints {
			if id := plan.DeviceNetID(e.Port); id != "" {
				return id
			}
		}
	}
	t.Fatal("no port found")
	return ""
}

// TestDelayRefused: where the way asked for is missing (TRELLIS_DELAY=netem on a kernel without
// netem, as a kernel with neither way is), up and diff refuse a delay naming the link, the
// field, the feature and the kernel, and nothing is created; `trellis link set` refuses it too.
func TestDelayRefused(t *testing.T) {
	if netemKernel() {
		testkit.Skip(t, "this kernel has netem: the refusal is for kernels without it (TestDelay covers netem)")
	}
	e := start(t)
	t.Setenv("TRELLIS_DELAY", "netem") // the trellis processes the test starts inherit it
	path := writeTopo(t, delayTopo("    delay: 20ms\n"))
	for _, verb := range []string{"diff", "up"} {
		_, stderr, err := trellis(t, e.state, verb, path)
		if err == nil || !strings.Contains(stderr, "links[0].delay") || !strings.Contains(stderr, "sch_netem") || !strings.Contains(stderr, "kernel ") {
			t.Errorf("%s with a delay and no netem: %v\n%s", verb, err, stderr)
		}
	}
	if nets := listNetworks(t, e.state); len(nets) != 0 {
		t.Errorf("networks after a refused up: %v", nets)
	}
	t.Setenv("TRELLIS_DELAY", "")
	rewriteTopo(t, path, delayTopo(""))
	mustTrellis(t, e.state, "up", path)
	t.Setenv("TRELLIS_DELAY", "netem")
	if _, stderr, err := trellis(t, e.state, "link", "dly", "a:eth1--b:eth1", "set", "delay=5ms"); err == nil || !strings.Contains(stderr, "sch_netem") {
		t.Errorf("link set delay with no netem: %v\n%s", err, stderr)
	}
	mustTrellis(t, e.state, "down", "dly")
	e.assertClean()
}
