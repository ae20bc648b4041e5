//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// engInfo is what `trellis inspect --json` says of a node's forwarding engines.
type engInfo struct {
	Dispatch  string `json:"dispatch"`
	PID       int    `json:"pid"`
	ToControl uint64 `json:"to_control"`
	Policed   uint64 `json:"policed"`
	Engines   []struct {
		Index      int     `json:"index"`
		Classified uint64  `json:"classified"`
		RxPackets  uint64  `json:"rx_packets"`
		TxPackets  uint64  `json:"tx_packets"`
		CPUs       []int   `json:"cpus"`
		Share      float64 `json:"share"`
		Host       string  `json:"host"`
		Down       bool    `json:"down"`
	} `json:"engines"`
	Mirror struct {
		Routes, Errors        int
		LastError             string
		LastMicros, MaxMicros int64
	} `json:"mirror"`
}

// engines reads node's engines and its init's pid from `trellis inspect --json`.
func engines(t testing.TB, state, network, node string) (*engInfo, int) {
	t.Helper()
	var info struct {
		Nodes []struct {
			Name    string   `json:"name"`
			PID     int      `json:"pid"`
			Engines *engInfo `json:"engines"`
		} `json:"nodes"`
	}
	out := mustTrellis(t, state, "inspect", network, "--json")
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, out)
	}
	for _, n := range info.Nodes {
		if n.Name == node {
			if n.Engines == nil {
				t.Fatalf("inspect shows no engines for %s", node)
			}
			return n.Engines, n.PID
		}
	}
	t.Fatalf("inspect shows no node %s", node)
	return nil, 0
}

// feRx returns the frames each FE of node has received so far.
func feRx(t testing.TB, state, network, node string) []uint64 {
	t.Helper()
	e, _ := engines(t, state, network, node)
	out := make([]uint64, len(e.Engines))
	for i, fe := range e.Engines {
		out[i] = fe.RxPackets
	}
	return out
}

// feNamespaces returns paths to the network namespaces of node's FEs: those the engines
// helper holds, other than the node's own and the root one.
func feNamespaces(t testing.TB, helper, control int) []string {
	t.Helper()
	skip := map[string]bool{}
	for _, p := range []string{fmt.Sprintf("/proc/%d/ns/net", control), "/proc/1/ns/net"} {
		if l, err := os.Readlink(p); err == nil {
			skip[l] = true
		}
	}
	fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", helper))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(l, "net:[") || skip[l] || seen[l] {
			continue
		}
		seen[l] = true
		out = append(out, fd)
	}
	return out
}

// sendUDP sends count datagrams of one flow (source port sport) from node to dst:9000.
func sendUDP(t testing.TB, state, network, node, dst string, sport, count int) {
	t.Helper()
	script := fmt.Sprintf(`import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("", %d))
for _ in range(%d):
    s.sendto(b"x" * 64, ("%s", 9000))
`, sport, count, dst)
	mustExec(t, state, network, node, "python3", "-c", script)
}

// deltas waits until the FEs have received at least want more frames than before (within
// feWait), and returns what each received.
func deltas(t testing.TB, state, network, node string, before []uint64, want uint64) []uint64 {
	t.Helper()
	deadline := time.Now().Add(feWait())
	for {
		after := feRx(t, state, network, node)
		d := make([]uint64, len(after))
		var sum uint64
		for i := range after {
			d[i] = after[i] - before[i]
			sum += d[i]
		}
		if sum >= want || time.Now().After(deadline) {
			return d
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// feWait is how long the engines tests wait for frames sent to show in the engines' counters:
// they do within milliseconds, but a loaded machine (or a guest under emulation) may not run
// the engines, or the reads of their counters, for seconds. It is a bound, not a pause.
func feWait() time.Duration { return time.Duration(10 * float64(time.Second) * timeScale()) }

// eventually polls cond until it holds or timeout passes.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
