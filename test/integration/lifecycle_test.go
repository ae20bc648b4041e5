//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// smallTopo is three nodes with a point-to-point link and a LAN.
const smallTopo = `name: %s
nodes:
  a:
    addresses:
      eth1: [10.0.0.1/24, fd00::1/64]
      eth2: [10.1.0.1/24]
  b:
    addresses:
      eth1: [10.0.0.2/24, fd00::2/64]
      eth2: [10.1.0.2/24]
  c:
    addresses:
      eth2: [10.1.0.3/24]
links:
  - endpoints: [a:eth1, b:eth1]
  - endpoints: [a:eth2, b:eth2, c:eth2]
`

func TestUpDownLeavesNothing(t *testing.T) {
	e := start(t)
	path := writeTopo(t, fmt.Sprintf(smallTopo, "updown"))
	out := mustTrellis(t, e.state, "up", path)
	if !strings.Contains(out, "network updown is up: 3 nodes, 2 links") {
		t.Errorf("up said %q, want it to say the network is up with 3 nodes and 2 links", out)
	}
	if got := listNetworks(t, e.state); !slices.Equal(got, []string{"updown"}) {
		t.Errorf("ls lists %v, want [updown]", got)
	}

	// The snapshot must see what the network is made of, or assertClean would prove nothing:
	// the LAN's 3 ports (its connector has no device; the point-to-point link names none, so
	// it is one veth pair between a and b, with no port), 3 node namespaces and init
	// processes, and the LAN's program (one for its three ports).
	during := snapshot(t).OursCount()
	want := map[string]int{"link": 3, "netns": 3, "node": 3, "bpf": 1}
	for kind, n := range want {
		if during[kind] != n {
			t.Errorf("while up, the host snapshot holds %d %s objects of the test, want %d (all: %v)", during[kind], kind, n, during)
		}
	}

	ping(t, e.state, "updown", "a", "10.0.0.2")
	ping(t, e.state, "updown", "c", "10.1.0.1")

	if out := mustTrellis(t, e.state, "down", "updown"); !strings.Contains(out, "network updown is down") {
		t.Errorf("down said %q", out)
	}
	e.assertClean()
	if got := listNetworks(t, e.state); len(got) != 0 {
		t.Errorf("ls lists %v after down, want nothing", got)
	}
}

func TestUpTwiceChangesNothing(t *testing.T) {
	e := start(t)
	doc := `name: twice
nodes:
  a:
    addresses:
      eth1: [10.0.0.1/24]
      eth2: [10.1.0.1/24]
    exec: ["ip route add 10.9.0.0/16 via 10.0.0.2"]
  b:
    addresses:
      eth1: [10.0.0.2/24]
      eth2: [10.1.0.2/24]
  c:
    addresses:
      eth2: [10.1.0.3/24]
links:
  - endpoints: [a:eth1, b:eth1]
    rate: 10mbit
  - endpoints: [a:eth2, b:eth2, c:eth2]
`
	path := writeTopo(t, doc)
	mustTrellis(t, e.state, "up", path)
	first := snapshot(t)
	pids := inspect(t, e.state, "twice").pids()
	routes := mustExec(t, e.state, "twice", "a", "ip", "route")

	out := mustTrellis(t, e.state, "up", path)
	if !strings.Contains(out, "nothing changed") {
		t.Errorf("second up said %q, want it to say nothing changed", out)
	}
	second := snapshot(t)
	assertSame(t, first, second)
	if got := inspect(t, e.state, "twice").pids(); !mapsEqual(got, pids) {
		t.Errorf("node pids changed: before %v, after %v", pids, got)
	}
	if got := mustExec(t, e.state, "twice", "a", "ip", "route"); got != routes {
		t.Errorf("routes in node a changed (exec run again?):\nbefore:\n%s\nafter:\n%s", routes, got)
	}

	mustTrellis(t, e.state, "down", "twice")
	e.assertClean()
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestValidationChangesNothing(t *testing.T) {
	cases := []struct {
		name  string
		doc   string
		line  int
		field string
		msg   string
	}{
		{"endpoint names a missing node", `name: bad1
nodes:
  r1:
    addresses:
      eth1: [10.0.0.1/24]
  r2:
links:
  - endpoints: [r1:eth1, r3:eth1]
`, 8, "links[0].endpoints[1]", `no node named "r3"`},
		{"bad rate", `name: bad2
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    rate: 10mbits
`, 7, "links[0].rate", `"10mbits" is not a rate`},
		{"unknown node key", `name: bad3
nodes:
  r1:
    adresses:
      eth1: [10.0.0.1/24]
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
`, 4, "nodes.r1.adresses", "unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := start(t)
			path := writeTopo(t, c.doc)
			out, errOut, err := trellis(t, e.state, "up", path)
			if exitCode(err) <= 0 {
				t.Fatalf("up of an invalid file: exit code %d (err %v), want non-zero\nstdout:\n%s\nstderr:\n%s", exitCode(err), err, out, errOut)
			}
			want := fmt.Sprintf("%s:%d: %s: %s", path, c.line, c.field, c.msg)
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr is\n%s\nwant it to contain %q", errOut, want)
			}
			if out != "" {
				t.Errorf("stdout is %q, want nothing", out)
			}
			e.assertClean()
			if got := listNetworks(t, e.state); len(got) != 0 {
				t.Errorf("ls lists %v, want nothing", got)
			}
			if recs, _ := filepath.Glob(filepath.Join(e.state, "networks", "*")); len(recs) != 0 {
				t.Errorf("the state directory holds %v, want no network", recs)
			}
		})
	}
}

// chainTopo is n nodes in a line, each link a /30 of 10.64.0.0/10, every node running one
// start command.
func chainTopo(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nnodes:\n", name)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  n%d:\n    addresses:\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "      eth0: [%s/30]\n", chainAddr(i-1, 2))
		}
		if i < n-1 {
			fmt.Fprintf(&b, "      eth1: [%s/30]\n", chainAddr(i, 1))
		}
		b.WriteString("    exec: [\"true\"]\n")
	}
	b.WriteString("links:\n")
	for i := 0; i < n-1; i++ {
		fmt.Fprintf(&b, "  - endpoints: [n%d:eth1, n%d:eth0]\n", i, i+1)
	}
	return b.String()
}

// chainAddr is host h (1 or 2) of the /30 of link i.
func chainAddr(i, h int) string {
	v := 10<<24 | 64<<16 | i*4 + h
	return fmt.Sprintf("%d.%d.%d.%d", v>>24&255, v>>16&255, v>>8&255, v&255)
}

func TestKillDuringUp(t *testing.T) {
	for _, delay := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			e := start(t)
			path := writeTopo(t, chainTopo("chain", 200))
			cmd := exec.Command(trellisBin, "--state-dir", e.state, "up", path)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			t0 := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(float64(delay) * timeScale()))
			killErr := killProcess(cmd.Process)
			werr := cmd.Wait()
			if cmd.ProcessState.Success() {
				t.Logf("up had finished (%v) before the kill: %s", time.Since(t0).Round(time.Millisecond), strings.TrimSpace(out.String()))
			} else {
				t.Logf("up killed after %v (kill: %v, wait: %v); stdout %q stderr %q", delay, killErr, werr, out.String(), errOut.String())
			}
			listed := listNetworks(t, e.state)
			t.Logf("left by the killed up: %v (of 200 nodes, 398 ports); ls lists %v", snapshot(t).OursCount(), listed)

			down, downErr, err := trellis(t, e.state, "down", "chain")
			switch {
			case err != nil && len(listed) == 0 && strings.Contains(downErr, "no network named"):
				// Killed before it recorded the network (a loaded machine): it made nothing
				// either, which assertClean checks.
				t.Logf("up was killed before it recorded chain: down says %q", strings.TrimSpace(downErr))
			case err != nil:
				t.Errorf("trellis down chain after up was killed: %v\nstdout:\n%s\nstderr:\n%s", err, down, downErr)
			}
			e.assertClean()
			if got := listNetworks(t, e.state); len(got) != 0 {
				t.Errorf("ls lists %v after down, want nothing", got)
			}
		})
	}
}

func TestExecFailureLeavesNothing(t *testing.T) {
	e := start(t)
	path := writeTopo(t, `name: xfail
nodes:
  a:
    addresses:
      eth1: [10.0.0.1/24]
    exec: ["ip link show eth1"]
  b:
    addresses:
      eth1: [10.0.0.2/24]
    exec: [false]
links:
  - endpoints: [a:eth1, b:eth1]
  - endpoints: [a:eth2, b:eth2]
    connector: bridge
`)
	out, errOut, err := trellis(t, e.state, "up", path)
	if err == nil {
		t.Fatalf("up of a network whose exec fails succeeded:\n%s", out)
	}
	for _, want := range []string{"node b", `exec[0] "false" failed`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr is\n%s\nwant it to contain %q", errOut, want)
		}
	}
	e.assertClean()
	if got := listNetworks(t, e.state); len(got) != 0 {
		t.Errorf("ls lists %v after the failed up, want nothing", got)
	}
}
