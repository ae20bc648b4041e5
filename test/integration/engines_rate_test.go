//go:build integration

package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestEnginesRate caps the link from h1 into r, a node with two engines, at 20 Mbit/s: a UDP
// flood from h1 through r reaches h2 at no more than the cap although its frames go to both
// engines (the cap holds for them and the node together), and the classifier counts the frames
// it dropped.
func TestEnginesRate(t *testing.T) {
	e := start(t)
	topo := strings.Replace(enginesTopo, "%s", "    engines: 2\n    dispatch: round-robin", 1)
	topo = strings.Replace(topo, "  - endpoints: [h1:eth1, r:eth1]\n", "  - endpoints: [h1:eth1, r:eth1]\n    rate: 20mbit\n", 1)
	file := writeTopo(t, topo)
	mustTrellis(t, e.state, "up", file)
	ping(t, e.state, "pdp-it", "h1", "10.91.2.1")

	rxBytes := func() uint64 {
		out := mustExec(t, e.state, "pdp-it", "h2", "cat", "/sys/class/net/eth1/statistics/rx_bytes")
		n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("rx_bytes of h2: %q: %v", out, err)
		}
		return n
	}
	before, b0, t0 := feRx(t, e.state, "pdp-it", "r"), rxBytes(), time.Now()
	flood := fmt.Sprintf(`import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.time() + 2
while time.time() < end:
    for _ in range(100):
        s.sendto(b"x" * 1000, ("%s", 9000))
`, "10.91.2.1")
	mustExec(t, e.state, "pdp-it", "h1", "python3", "-c", flood)
	time.Sleep(300 * time.Millisecond) // what is on its way arrives
	mbps := float64(rxBytes()-b0) * 8 / time.Since(t0).Seconds() / 1e6
	t.Logf("a flood through r reached h2 at %.1f Mbit/s (cap 20)", mbps)
	if mbps > 22 || mbps < 10 {
		t.Errorf("a flood through r with a 20mbit link into it reached h2 at %.1f Mbit/s; want at most 20 (+10 %%), and at least 10", mbps)
	}
	if d := deltas(t, e.state, "pdp-it", "r", before, 100); d[0] == 0 || d[1] == 0 {
		t.Errorf("the flood's frames went to the engines as %v; want both (round-robin)", d)
	}
	info, _ := engines(t, e.state, "pdp-it", "r")
	if info.Policed == 0 {
		t.Errorf("inspect shows no frame dropped by the rate cap after a flood at many times the rate")
	}
	t.Logf("the classifier dropped %d frames over the cap", info.Policed)
	mustTrellis(t, e.state, "down", "pdp-it")
	e.assertClean()
}
