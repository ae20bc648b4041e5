//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
)

// rateTopo is two nodes on a point-to-point link; rateLine is the link's rate line, or "".
func rateTopo(name, rateLine string) string {
	return fmt.Sprintf(`name: %s
nodes:
  a:
    addresses:
      eth1: [10.0.0.1/24]
  b:
    addresses:
      eth1: [10.0.0.2/24]
links:
  - endpoints: [a:eth1, b:eth1]
%s`, name, rateLine)
}

// tbfOf returns the tbf qdisc of a port, or nil, and what `tc qdisc show dev PORT` prints.
func tbfOf(t *testing.T, port string) (*netlink.Tbf, string) {
	t.Helper()
	var qdiscs []netlink.Qdisc
	err := inPortsOf(t, port, func() error {
		link, err := netlink.LinkByName(port)
		if err != nil {
			return err
		}
		qdiscs, err = testkit.RetryDump(func() ([]netlink.Qdisc, error) { return netlink.QdiscList(link) })
		return err
	})
	if err != nil {
		t.Fatalf("qdiscs of %s: %v", port, err)
	}
	out, err := exec.Command("tc", append(portNSArgs(port), "qdisc", "show", "dev", port)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tc qdisc show dev %s: %v\n%s", port, err, out)
	}
	var tbf *netlink.Tbf
	for _, q := range qdiscs {
		if q, ok := q.(*netlink.Tbf); ok {
			if tbf != nil {
				t.Errorf("port %s has two tbf qdiscs", port)
			}
			tbf = q
		}
	}
	return tbf, string(out)
}

// checkShaper checks that both ports of a link are shaped at bps (0: not shaped).
func checkShaper(t *testing.T, info *netInfo, bps uint64, tcRate string) {
	t.Helper()
	for _, ep := range info.link(t, "a:eth1--b:eth1").Endpoints {
		if ep.Port == "" { // a direct link: no port, so nothing outside the nodes shapes it
			if bps != 0 {
				t.Errorf("endpoint %s:%s has no port, and the link should be shaped at %d bit/s", ep.Node, ep.Interface, bps)
			}
			continue
		}
		tbf, tc := tbfOf(t, ep.Port)
		switch {
		case bps == 0 && tbf != nil:
			t.Errorf("port %s still has a tbf qdisc (rate %d bit/s):\n%s", ep.Port, tbf.Rate*8, tc)
		case bps == 0 && strings.Contains(tc, "tbf"):
			t.Errorf("tc shows a tbf on %s:\n%s", ep.Port, tc)
		case bps == 0:
		case tbf == nil:
			t.Errorf("port %s has no tbf qdisc:\n%s", ep.Port, tc)
		case tbf.Rate*8 != bps:
			t.Errorf("port %s: tbf rate %d bit/s, want %d", ep.Port, tbf.Rate*8, bps)
		case !strings.Contains(tc, "tbf") || !strings.Contains(tc, "rate "+tcRate+" "):
			t.Errorf("tc qdisc show dev %s does not show a tbf with rate %s:\n%s", ep.Port, tcRate, tc)
		}
	}
}

func TestRateChangeLive(t *testing.T) {
	e := start(t)
	path := writeTopo(t, rateTopo("ratelive", "    rate: 10mbit\n"))
	mustTrellis(t, e.state, "up", path)
	info := inspect(t, e.state, "ratelive")
	pids := info.pids()
	if r := info.link(t, "a:eth1--b:eth1").Rate; r != "10mbit" {
		t.Errorf("inspect shows rate %q, want 10mbit", r)
	}
	checkShaper(t, info, 10_000_000, "10Mbit")
	ping(t, e.state, "ratelive", "a", "10.0.0.2")

	rewriteTopo(t, path, rateTopo("ratelive", "    rate: 50mbit\n"))
	if out := mustTrellis(t, e.state, "up", path); !strings.Contains(out, "~ link a:eth1--b:eth1: rate ") {
		t.Errorf("up with a new rate said %q, want it to say the rate of link a:eth1--b:eth1 changed", out)
	}
	info = inspect(t, e.state, "ratelive")
	if r := info.link(t, "a:eth1--b:eth1").Rate; r != "50mbit" {
		t.Errorf("inspect shows rate %q, want 50mbit", r)
	}
	checkShaper(t, info, 50_000_000, "50Mbit")
	if got := info.pids(); !mapsEqual(got, pids) {
		t.Errorf("node pids changed with the rate: before %v, after %v", pids, got)
	}
	ping(t, e.state, "ratelive", "b", "10.0.0.1")

	rewriteTopo(t, path, rateTopo("ratelive", ""))
	// Without the rate the link has nothing to enforce: up also says it becomes one veth pair.
	if out := mustTrellis(t, e.state, "up", path); !strings.Contains(out, "~ link a:eth1--b:eth1: connector shortbridge -> veth (a:eth1, b:eth1 to one veth pair re-plugged") ||
		!strings.Contains(out, "; rate 50mbit -> none") {
		t.Errorf("up without the rate said %q, want it to say link a:eth1--b:eth1 loses its rate and its ports", out)
	}
	info = inspect(t, e.state, "ratelive")
	if r := info.link(t, "a:eth1--b:eth1").Rate; r != "" {
		t.Errorf("inspect shows rate %q, want none", r)
	}
	checkShaper(t, info, 0, "")
	if got := info.pids(); !mapsEqual(got, pids) {
		t.Errorf("node pids changed with the rate: before %v, after %v", pids, got)
	}
	ping(t, e.state, "ratelive", "a", "10.0.0.2")
	ping(t, e.state, "ratelive", "b", "10.0.0.1")

	mustTrellis(t, e.state, "down", "ratelive")
	e.assertClean()
}

// iperfResult is the part of `iperf3 -J` output this test reads.
type iperfResult struct {
	End struct {
		SumSent struct {
			Seconds       float64 `json:"seconds"`
			Bytes         uint64  `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int     `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			Seconds       float64 `json:"seconds"`
			Bytes         uint64  `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

func TestRateAccuracy(t *testing.T) {
	testkit.RequireTool(t, "iperf3", "scripts/setup.sh installs iperf3")
	cases := []struct {
		rate     string
		bps      float64
		duration int
	}{
		{"1mbit", 1e6, 10},
		{"10mbit", 10e6, 6},
		{"100mbit", 100e6, 6},
		{"1gbit", 1e9, 6},
	}
	var summary []string
	for _, c := range cases {
		t.Run(c.rate, func(t *testing.T) {
			e := start(t)
			name := "rate" + c.rate
			mustTrellis(t, e.state, "up", writeTopo(t, rateTopo(name, "    rate: "+c.rate+"\n")))
			res := medianRun(rateRuns, func() *iperfResult { return runIperf(t, e.state, name, c.duration) })
			got := res.End.SumReceived.BitsPerSecond
			ratio := onWire(got, 1500) / c.bps
			drops := uint64(0)
			for _, ep := range inspect(t, e.state, name).link(t, "a:eth1--b:eth1").Endpoints {
				drops += ep.Drops
			}
			line := fmt.Sprintf("rate %-7s cap %10.0f bit/s  measured %12.0f bit/s (receiver, %.1f s, %d bytes)  ratio %.4f  [sender %.0f bit/s, %d retransmits, %d shaper drops]",
				c.rate, c.bps, got, res.End.SumReceived.Seconds, res.End.SumReceived.Bytes, ratio,
				res.End.SumSent.BitsPerSecond, res.End.SumSent.Retransmits, drops)
			t.Log(line)
			summary = append(summary, line)
			if ratio < 0.95 || ratio > 1.05 {
				t.Errorf("measured %.0f bit/s on a %s link: %.1f%% of the cap, want within ±5%%", got, c.rate, 100*ratio)
			}
			mustTrellis(t, e.state, "down", name)
			e.assertClean()
		})
	}
	t.Logf("rate accuracy (TCP payload received by iperf3, as Ethernet frames on the wire, vs. the link cap; median of %d runs):", rateRuns)
	t.Logf("\n%s", strings.Join(summary, "\n"))
}

// onWire converts a TCP payload rate (what iperf3 reports) into the rate of the Ethernet frames
// that carry it on a link of MTU mtu: the quantity a link's cap limits, as tc counts it. Each
// full frame carries mtu-52 bytes of payload (IPv4 20, TCP 20, timestamps 12) in mtu+14 bytes.
// Without it, TCP's ceiling under an exact cap is 95.6 % at MTU 1500, and the ±5 % band would
// be left with no room for measurement noise.
func onWire(payloadBPS float64, mtu int) float64 {
	return payloadBPS * float64(mtu+14) / float64(mtu-52)
}

// rateRuns is how many times a capped rate is measured; the median counts. One iperf3 run can
// be thrown off by anything else the 2-core machine does in those seconds; the shaper's
// accuracy is what the median shows.
const rateRuns = 3

// medianRun runs an iperf3 measurement n times and returns the run with the median received rate.
func medianRun(n int, run func() *iperfResult) *iperfResult {
	results := make([]*iperfResult, n)
	for i := range results {
		results[i] = run()
	}
	sort.Slice(results, func(i, j int) bool {
		return results[i].End.SumReceived.BitsPerSecond < results[j].End.SumReceived.BitsPerSecond
	})
	return results[n/2]
}

// runIperf runs an iperf3 server in node b and a client in node a for duration seconds, and
// returns the client's JSON report.
func runIperf(t *testing.T, state, network string, duration int) *iperfResult {
	t.Helper()
	server := startIn(t, state, network, "b", "iperf3", "-s", "-1", "-B", "10.0.0.2")
	var (
		res     iperfResult
		out     string
		lastErr error
	)
	// The server listens shortly after it starts: retry while the connection is refused.
	//
	// Four TCP streams, not one: a single stream may not fill the link. TCP small queues let a
	// socket have only about a millisecond of its rate in queues below it, and a veth keeps the
	// socket charged for a frame until it is freed behind the shaper; when the machine is slow
	// to schedule the sender, one stream then leaves the shaper idle (seen: 88 % of a 100mbit
	// cap with no drop and no retransmission). The test is about the cap, so the offered load
	// must exceed it.
	for attempt := 0; attempt < 50; attempt++ {
		var errOut string
		out, errOut, lastErr = execIn(t, state, network, "a", "iperf3", "-c", "10.0.0.2", "-t", fmt.Sprint(duration), "-O", "1", "-P", "4", "-J")
		res = iperfResult{}
		jerr := json.Unmarshal([]byte(out), &res)
		if lastErr == nil && jerr == nil && res.Error == "" {
			break
		}
		if !strings.Contains(res.Error+errOut, "refused") {
			t.Fatalf("iperf3 client: %v (%s)\n%s\n%s", lastErr, res.Error, out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if lastErr != nil || res.Error != "" {
		t.Fatalf("iperf3 client never connected: %v %s", lastErr, res.Error)
	}
	if err := server.wait(30 * time.Second); err != nil {
		t.Errorf("iperf3 server: %v\n%s%s", err, server.stdout, server.stderr)
	}
	return &res
}

// TestDownWithConnectionInFlight brings a network down while a TCP sender in node a has
// megabytes queued for a 1mbit link. Ending a's processes leaves that connection to the kernel
// (an orphan still sending, for minutes), which holds a's network namespace and so its port:
// down must still leave nothing (seen in CI: the port of a 1mbit link there 15 s after down).
func TestDownWithConnectionInFlight(t *testing.T) {
	testkit.RequireTool(t, "iperf3", "scripts/setup.sh installs iperf3 (the sender left in flight)")
	e := start(t)
	name := "inflight"
	mustTrellis(t, e.state, "up", writeTopo(t, rateTopo(name, "    rate: 1mbit\n")))
	server := startIn(t, e.state, name, "b", "iperf3", "-s", "-1", "-B", "10.0.0.2")
	client := startIn(t, e.state, name, "a", "sh", "-c", "sleep 1; iperf3 -c 10.0.0.2 -t 60 -P 4")
	time.Sleep(4 * time.Second) // the senders' queues fill behind the 1mbit shaper
	mustTrellis(t, e.state, "down", name)
	client.wait(10 * time.Second) // ended by down: the error says how
	server.wait(10 * time.Second)
	e.assertClean()
}
