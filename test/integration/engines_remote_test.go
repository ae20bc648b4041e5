//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// remoteEnginesTopo is enginesTopo on machine m1, r's second engine on machine m2.
const remoteEnginesTopo = `name: pdp-cr
%s
nodes:
  h1:
    host: m1
    addresses:
      eth1: [10.92.1.1/24]
    exec: ["ip route add default via 10.92.1.2"]
  r:
    host: m1
    engines: [{}, {host: m2}]
    dispatch: flow
    addresses:
      eth1: [10.92.1.2/24]
      eth2: [10.92.2.2/24]
  h2:
    host: m1
    addresses:
      eth1: [10.92.2.1/24]
    exec:
      - ip route add default via 10.92.2.2
      - python3 -c 'import socket; s = socket.socket(2, 2); s.bind(("", 9000)); [s.recv(2048) for _ in iter(int, 1)]' >/dev/null 2>&1 &
links:
  - endpoints: [h1:eth1, r:eth1]
  - endpoints: [r:eth2, h2:eth1]
`

// TestEnginesRemote is the PdP paper's cluster router: node r on m1 has two engines, the
// second held on m2 and reached through VXLAN. Transit traffic is forwarded by both (counted
// per engine in inspect); flow dispatch keeps each flow on one engine; a route added in r
// reaches the FE on m2; kill -9 of m2's holder moves its share to engine 0, and up on m2
// brings it back; down on both machines leaves nothing.
func TestEnginesRemote(t *testing.T) {
	m := machinesUp(t, 2)
	path := writeTopo(t, fmt.Sprintf(remoteEnginesTopo, m.hostsYAML("egre")))
	m.upAll(t, path, "pdp-cr")
	m.ping(t, 1, "pdp-cr", "h1", "10.92.2.1")

	used := m.remoteFlows(t, 40000, 16)
	if !used[0] || !used[1] {
		t.Fatalf("16 flows went to engines %v; want both, the local and the remote one", used)
	}
	m.checkRemoteRoute(t)

	holder := m.enginesHelpers(2)
	if len(holder) != 1 {
		t.Fatalf("m2 runs %d engines holders; want 1", len(holder))
	}
	if err := syscall.Kill(holder[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The helper pings the remote FE every 250 ms, and drops it from the classifier's table
	// before its status (what inspect shows) says it is down: wait for that, not a fixed time.
	if !eventually(time.Duration(10*float64(time.Second)*timeScale()), func() bool { _, down := m.remoteEngineState(t); return down }) {
		t.Errorf("10 s after kill -9 of the remote FE, inspect does not show engine 1 down")
	}
	if used := m.remoteFlows(t, 41000, 8); used[1] || !used[0] {
		t.Errorf("after kill -9 of the remote FE, flows went to engines %v; want all on engine 0", used)
	}
	if host, down := m.remoteEngineState(t); host != "m2" || !down {
		t.Errorf("after kill -9 of the remote FE, inspect shows engine 1 on %q, down %v; want on m2, down", host, down)
	}
	m.trellis(t, 2, "up", path)
	if !eventually(10*time.Second, func() bool { return m.remoteFlows(t, 42000, 8)[1] }) {
		t.Errorf("after up on m2, no flow reaches the remote engine again")
	}
	if host, down := m.remoteEngineState(t); host != "m2" || down {
		t.Errorf("after up on m2, inspect shows engine 1 on %q, down %v; want on m2, not down", host, down)
	}
	if n := m.remoteRoutes(t); n != 1000 {
		t.Errorf("the FE made anew on m2 has %d of r's 1000 routes in 10.100.0.0/16; want all (copied when it came back)", n)
	}

	for i := 1; i <= 2; i++ {
		m.trellis(t, i, "down", "pdp-cr")
		if h := m.enginesHelpers(i); len(h) != 0 {
			t.Errorf("after down, m%d still runs engines helpers %v", i, h)
		}
		if links := m.links(t, i); strings.Join(links, " ") != "eth0 lo" {
			t.Errorf("after down, m%d has links %v", i, links)
		}
	}
}

// remoteFlows sends count flows (source ports from sport) of 100 datagrams h1 -> h2 and
// returns the engines they went to, failing the test if one was split between engines or if
// the engine did not send the flow's frames on (for engine 1, back from m2 through VXLAN).
func (m *machines) remoteFlows(t *testing.T, sport, count int) map[int]bool {
	t.Helper()
	used := map[int]bool{}
	for p := sport; p < sport+count; p++ {
		before, txBefore := m.classified(t)
		m.mustExec(t, 1, "pdp-cr", "h1", "python3", "-c", fmt.Sprintf(`import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("", %d))
for _ in range(100):
    s.sendto(b"x" * 64, ("10.92.2.1", 9000))
`, p))
		var d, tx []uint64
		eventually(feWait(), func() bool {
			after, txAfter := m.classified(t)
			tx = txAfter
			d = make([]uint64, len(after))
			var sum uint64
			for i := range after {
				d[i] = after[i] - before[i]
				sum += d[i]
			}
			return sum >= 100
		})
		on := -1
		for i, n := range d {
			switch {
			case n >= 100 && on < 0:
				on = i
			case n > 3:
				t.Fatalf("flow from port %d: engines classified %v; want its 100 frames on one", p, d)
			}
		}
		if on < 0 {
			t.Fatalf("flow from port %d: engines classified %v; want 100 frames on one", p, d)
		}
		if !eventually(feWait(), func() bool { _, tx = m.classified(t); return tx[on]-txBefore[on] >= 100 }) {
			t.Fatalf("flow from port %d on engine %d: it sent %d frames out through r's ports; want 100", p, on, tx[on]-txBefore[on])
		}
		used[on] = true
	}
	return used
}

// classified is the frames the classifier sent to each of r's engines, and those each sent
// out through r's ports.
func (m *machines) classified(t *testing.T) (classified, tx []uint64) {
	t.Helper()
	for _, e := range m.rEngines(t).Engines {
		classified, tx = append(classified, e.Classified), append(tx, e.TxPackets)
	}
	return classified, tx
}

// remoteEngineState is where inspect on m1 says r's engine 1 runs, and whether it is down.
func (m *machines) remoteEngineState(t *testing.T) (host string, down bool) {
	t.Helper()
	e := m.rEngines(t).Engines
	if len(e) != 2 {
		t.Fatalf("inspect on m1 shows %d engines of r; want 2", len(e))
	}
	return e[1].Host, e[1].Down
}

// rEngines is what inspect on m1 shows of r's engines.
func (m *machines) rEngines(t *testing.T) *engInfo {
	t.Helper()
	var info struct {
		Nodes []struct {
			Name    string   `json:"name"`
			Engines *engInfo `json:"engines"`
		} `json:"nodes"`
	}
	out := m.trellis(t, 1, "inspect", "pdp-cr", "--json")
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, out)
	}
	for _, n := range info.Nodes {
		if n.Name == "r" && n.Engines != nil {
			return n.Engines
		}
	}
	t.Fatalf("inspect on m1 shows no engines of r:\n%s", out)
	return nil
}

// checkRemoteRoute adds a route in r (on m1) and checks the FE held on m2 has it within a
// second, then deletes it and checks it leaves.
func (m *machines) checkRemoteRoute(t *testing.T) {
	t.Helper()
	holder := m.enginesHelpers(2)
	if len(holder) != 1 {
		t.Fatalf("m2 runs %d engines holders; want 1", len(holder))
	}
	fes := feNamespaces(t, holder[0], holder[0])
	if len(fes) != 1 {
		t.Fatalf("m2's holder holds %d FE namespaces; want 1", len(fes))
	}
	show := func() string {
		out, err := exec.Command("nsenter", "--net="+fes[0], "ip", "route", "show", "10.99.0.0/16").CombinedOutput()
		if err != nil {
			t.Fatalf("ip route in m2's FE: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, op := range []string{"add", "del"} {
		m.mustExec(t, 1, "pdp-cr", "r", "ip", "route", op, "10.99.0.0/16", "via", "10.92.2.1")
		if !eventually(time.Second, func() bool { return (show() != "") == (op == "add") }) {
			t.Errorf("route %s in r on m1: m2's FE shows %q after 1 s", op, show())
		}
	}

	// 1000 routes: in m2's FE within the 1 s for mirroring 1000 changes.
	var batch strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&batch, "route add 10.100.%d.%d/32 via 10.92.2.1\n", i/250, i%250+1)
	}
	count := func() int { return m.remoteRoutes(t) }
	t0 := time.Now()
	m.mustExec(t, 1, "pdp-cr", "r", "sh", "-c", "ip -batch - <<'EOF'\n"+batch.String()+"EOF\n")
	made := time.Since(t0)
	if !eventually(5*time.Second, func() bool { return count() == 1000 }) {
		t.Fatalf("5 s after 1000 routes were added in r, m2's FE has %d of them", count())
	}
	took := time.Since(t0)
	t.Logf("1000 routes: in r after %v (trellis exec + ip -batch), in m2's FE after %v", made.Round(time.Millisecond), took.Round(time.Millisecond))
	if took-made > time.Second {
		t.Errorf("1000 routes reached m2's FE %v after r had them; want under 1 s", (took - made).Round(time.Millisecond))
	}
}

// remoteRoutes counts the routes within 10.100.0.0/16 in the FE held on m2.
func (m *machines) remoteRoutes(t *testing.T) int {
	t.Helper()
	holder := m.enginesHelpers(2)
	if len(holder) != 1 {
		t.Fatalf("m2 runs %d engines holders; want 1", len(holder))
	}
	fes := feNamespaces(t, holder[0], holder[0])
	if len(fes) != 1 {
		t.Fatalf("m2's holder holds %d FE namespaces; want 1", len(fes))
	}
	out, err := exec.Command("nsenter", "--net="+fes[0], "ip", "route", "show", "root", "10.100.0.0/16").Output()
	if err != nil {
		t.Fatalf("ip route in m2's FE: %v", err)
	}
	return strings.Count(string(out), "\n")
}

// enginesHelpers finds the engines helpers (and holders) of machine i's state directory.
func (m *machines) enginesHelpers(i int) []int {
	id := m.stateID(i)
	var out []int
	for pid, p := range testkit.Processes() {
		if len(p.Cmdline) > 1 && p.Cmdline[0] == "trellis-engines" && p.Cmdline[1] == id {
			out = append(out, pid)
		}
	}
	return out
}
