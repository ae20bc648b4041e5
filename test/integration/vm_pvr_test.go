//go:build integration

package integration

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pvrTopo is h1 -- r -- h2 with r a VM node with two engine VMs (parallel virtual routers);
// h2 swallows UDP on port 9000 and serves iperf3.
const pvrTopo = `name: pvr-it
nodes:
  h1:
    addresses:
      eth1: [10.94.1.1/24]
    exec: ["ip route add default via 10.94.1.2"]
  r:
    kind: vm
    engines: 2
    addresses:
      lo: [10.94.255.1/32]
      eth1: [10.94.1.2/24]
      eth2: [10.94.2.2/24]
  h2:
    addresses:
      eth1: [10.94.2.1/24]
    exec:
      - ip route add default via 10.94.2.2
      - python3 -c 'import socket; s = socket.socket(2, 2); s.bind(("", 9000)); [s.recv(2048) for _ in iter(int, 1)]' >/dev/null 2>&1 &
      - iperf3 -s -D >/dev/null 2>&1
links:
  - endpoints: [h1:eth1, r:eth1]
  - endpoints: [r:eth2, h2:eth1]
`

// TestVMEngines checks a VM node with two engine VMs between two containers: ping through it
// and to its own addresses, flow dispatch keeping each UDP flow on one engine VM and using
// both, a multi-flow TCP stream forwarded, inspect showing both engine VMs' frames and QEMU
// processes; an engine VM killed with kill -9 loses its flows to the other within a second
// or two, ls and diff say so, and up starts it again; a change of dispatch is live; down
// leaves nothing.
func TestVMEngines(t *testing.T) {
	needQEMU(t)
	e := start(t)
	file := writeTopo(t, pvrTopo)
	mustTrellis(t, e.state, "up", file)
	ping(t, e.state, "pvr-it", "h1", "10.94.2.1")   // through the engine VMs
	ping(t, e.state, "pvr-it", "h1", "10.94.255.1") // the node's own: its VM answers
	ping(t, e.state, "pvr-it", "h2", "10.94.1.1")

	used := pvrFlows(t, e.state, 40000)
	if len(used) != 2 {
		t.Errorf("8 flows went to engine VMs %v; want both used", used)
	}

	// A multi-flow TCP stream through the engine VMs (slow under emulation).
	before := feRx(t, e.state, "pvr-it", "r")
	out := mustExec(t, e.state, "pvr-it", "h1", "iperf3", "-c", "10.94.2.1", "-P", "4", "-t", "3", "-J")
	var res struct {
		End struct {
			SumReceived struct {
				Bytes uint64 `json:"bytes"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	after := feRx(t, e.state, "pvr-it", "r")
	t.Logf("4 TCP flows: %d bytes received; engine VMs received %d and %d frames", res.End.SumReceived.Bytes,
		after[0]-before[0], after[1]-before[1])
	if res.End.SumReceived.Bytes < 100_000 || after[0]+after[1]-before[0]-before[1] < 100 {
		t.Errorf("4 TCP flows through r: %d bytes received, engine VMs got %v frames more; want the stream through them",
			res.End.SumReceived.Bytes, []uint64{after[0] - before[0], after[1] - before[1]})
	}

	text := mustTrellis(t, e.state, "inspect", "pvr-it")
	for _, want := range []string{"engine VMs: fe0 QEMU pid ", ", fe1 QEMU pid ", "r     fe0 ", "r     fe1 "} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect does not show %q:\n%s", want, text)
		}
	}

	// kill -9 of engine VM 1: its taps go with its QEMU, the helper drops it, its flows go to
	// engine VM 0.
	pid := pvrEnginePID(t, text, "fe1")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !eventually(5*time.Second, func() bool {
		info, _ := engines(t, e.state, "pvr-it", "r")
		return info.Engines[1].Down && !info.Engines[0].Down
	}) {
		t.Fatalf("5 s after kill -9 of engine VM 1, inspect does not show it down")
	}
	if used := pvrFlows(t, e.state, 40000); len(used) != 1 || !used[0] {
		t.Errorf("with engine VM 1 gone, the 8 flows went to %v; want all on engine VM 0", used)
	}
	ping(t, e.state, "pvr-it", "h1", "10.94.2.1")
	if out := mustTrellis(t, e.state, "ls"); !strings.Contains(out, "3 (1 in part)") {
		t.Errorf("ls after kill -9 of an engine VM:\n%s\nwant 3 (1 in part)", out)
	}
	if out := mustTrellis(t, e.state, "diff", file); !strings.Contains(out, "node r (restarts): part of it is not running (its VM or an engine VM)") {
		t.Errorf("diff after kill -9 of an engine VM:\n%s", out)
	}

	// up starts the node and its engine VMs again: both take flows.
	mustTrellis(t, e.state, "up", file)
	if used := pvrFlows(t, e.state, 40000); len(used) != 2 {
		t.Errorf("after up restarted the node, the 8 flows went to engine VMs %v; want both", used)
	}

	// A change of dispatch is live: the helper is replaced, the VMs keep running.
	_, nodePID := engines(t, e.state, "pvr-it", "r")
	rewriteTopo(t, file, strings.Replace(pvrTopo, "    engines: 2\n", "    engines: 2\n    dispatch: round-robin\n", 1))
	mustTrellis(t, e.state, "up", file)
	if _, pid := engines(t, e.state, "pvr-it", "r"); pid != nodePID {
		t.Errorf("a change of dispatch restarted VM node r (pid %d -> %d)", nodePID, pid)
	}
	before = feRx(t, e.state, "pvr-it", "r")
	sendUDP(t, e.state, "pvr-it", "h1", "10.94.2.1", 40000, 40)
	if d := deltas(t, e.state, "pvr-it", "r", before, 40); d[0] < 15 || d[1] < 15 {
		t.Errorf("one flow under round-robin: engine VMs received %v; want about 20 each", d)
	}

	mustTrellis(t, e.state, "down", "pvr-it")
	e.assertClean()
}

// pvrFlows sends 8 UDP flows of 30 frames (source ports from sport) from h1 through r, checks
// each went to one engine VM only, and returns the engine VMs used.
func pvrFlows(t *testing.T, state string, sport int) map[int]bool {
	t.Helper()
	used := map[int]bool{}
	for p := sport; p < sport+8; p++ {
		before := feRx(t, state, "pvr-it", "r")
		sendUDP(t, state, "pvr-it", "h1", "10.94.2.1", p, 30)
		d := deltas(t, state, "pvr-it", "r", before, 30)
		on, spread := -1, false
		for i, n := range d {
			switch {
			case n >= 30 && on < 0:
				on = i
			case n > 3: // a copied ARP reply at most
				spread = true
			}
		}
		if on < 0 || spread {
			t.Fatalf("flow from port %d: engine VMs received %v; want its 30 frames all on one", p, d)
		}
		used[on] = true
	}
	return used
}

// pvrEnginePID finds engine VM name's QEMU pid in inspect's note "engine VMs: fe0 QEMU pid N, ...".
func pvrEnginePID(t *testing.T, inspectText, name string) int {
	t.Helper()
	_, rest, ok := strings.Cut(inspectText, name+" QEMU pid ")
	var pid int
	if ok {
		for _, c := range rest {
			if c < '0' || c > '9' {
				break
			}
			pid = pid*10 + int(c-'0')
		}
	}
	if pid == 0 {
		t.Fatalf("inspect names no QEMU pid for engine VM %s:\n%s", name, inspectText)
	}
	return pid
}
