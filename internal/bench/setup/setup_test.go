package setup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ebpfexamples "github.com/trellisnet/trellis/examples/ebpf"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// The bench's topologies must pass the same checks as a user's, with every setup's link settings.
func TestBenchTopology(t *testing.T) {
	for _, c := range []struct {
		settings  string
		connector string
		check     func(l *spec.Link) bool
	}{
		{"connector: " + spec.Shortbridge, spec.Shortbridge, nil},
		{"connector: " + spec.Bridge, spec.Bridge, nil},
		{"loss: 0.001%", "", func(l *spec.Link) bool { return l.Impair.Loss == 0.001 }},
		{"rate: 10gbit", "", func(l *spec.Link) bool { return l.Rate == 10_000_000_000 }},
	} {
		n, err := spec.Parse("b.yaml", []byte(benchFile("bench-x", c.settings)))
		if err != nil {
			t.Fatalf("%s: %v", c.settings, err)
		}
		if c.check != nil && (!c.check(n.Links[0]) || !c.check(n.Links[1])) {
			t.Errorf("%s: links %+v", c.settings, n.Links)
		}
		p, err := plan.Make(n, "abcd1234", "", &plan.Names{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Links) != 2 || c.connector != "" && p.Links[0].Connector != c.connector || p.Links[0].Ports[0].Node != "src" {
			t.Errorf("%s: unexpected plan %+v", c.settings, p.Links)
		}
	}
}

// TestEbpfTopology: the node under test of setup ebpf-l3 runs the program and its kernel does
// not forward (the program alone does).
func TestEbpfTopology(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "l3.c")
	if err := os.WriteFile(prog, ebpfexamples.L3, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := spec.Parse("b.yaml", []byte(ebpfTopology("bench-x", prog)))
	if err != nil {
		t.Fatal(err)
	}
	var nut *spec.Node
	for _, nd := range n.Nodes {
		if nd.Name == "nut" {
			nut = nd
		}
	}
	if nut == nil || nut.Dataplane == nil || nut.Dataplane.Path != prog || nut.Sysctl["net.ipv4.ip_forward"] != "0" {
		t.Errorf("node under test %+v: want dataplane %s and ip_forward 0", nut, prog)
	}
}

// The tunnel setups' topology: source and sink on machine A, the node under test on B, both
// links crossing in the named tunnel, with MTU 1500 inside an underlay of 1600.
func TestSpreadTopology(t *testing.T) {
	for _, c := range []struct{ tunnel, connector string }{{spec.EGRE, spec.Shortbridge}, {spec.EGRE, spec.Bridge}, {spec.VXLAN, spec.Shortbridge}} {
		n, err := spec.Parse("s.yaml", spreadTopology("bench-x", c.tunnel, c.connector, "198.18.101.1", "198.18.101.2"))
		if err != nil {
			t.Fatalf("%s/%s: %v", c.tunnel, c.connector, err)
		}
		wantNodes := map[string][]string{"ma": {"src", "sink"}, "mb": {"nut"}}
		for host, nodes := range wantNodes {
			p, err := plan.Make(n, "abcd1234", host, &plan.Names{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, nd := range p.Nodes {
				got = append(got, nd.Name)
			}
			if !slices.Equal(got, nodes) {
				t.Errorf("%s: nodes on %s are %v, want %v", c.tunnel, host, got, nodes)
			}
			if p.Tunnel != c.tunnel || len(p.Links) != 2 {
				t.Fatalf("%s on %s: tunnel %q, %d links", c.tunnel, host, p.Tunnel, len(p.Links))
			}
			for _, l := range p.Links {
				if len(l.Ports) != 1 || len(l.Tunnels) != 1 || l.MTU != 1500 || l.Connector != c.connector {
					t.Errorf("%s on %s: link %s has %d ports, %d tunnels, MTU %d, connector %s", c.tunnel, host, l.Name, len(l.Ports), len(l.Tunnels), l.MTU, l.Connector)
				}
			}
		}
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		names []string
		bad   string // "" for no error
	}{
		{nil, ""},
		{Names(), ""},
		{[]string{"native", "nosuch"}, `"nosuch"`},
		{[]string{"egre", "vxlan", "bridges"}, `"egre", "bridges"`},
	} {
		err := Check(c.names)
		if c.bad == "" {
			if err != nil {
				t.Errorf("Check(%v) = %v", c.names, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnknownSetup) || !strings.Contains(err.Error(), c.bad) || !strings.Contains(err.Error(), strings.Join(Names(), ", ")) {
			t.Errorf("Check(%v) = %v, want it to name %s and list the known setups", c.names, err, c.bad)
		}
	}
}

// A run's record tells a live run from a dead one, also when the dead run's pid was reused.
func TestRunAlive(t *testing.T) {
	start, err := startTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		run  Run
		want bool
	}{
		{"this process", Run{PID: os.Getpid(), Start: start}, true},
		{"pid reused", Run{PID: os.Getpid(), Start: start + 1}, false},
		{"no such process", Run{PID: 1 << 30, Start: start}, false},
	} {
		if got := c.run.alive(); got != c.want {
			t.Errorf("%s: alive() = %v, want %v", c.name, got, c.want)
		}
	}
}

// Clean leaves live runs alone, and refuses a record it cannot read rather than guess.
func TestCleanLeavesLiveRuns(t *testing.T) {
	dir := t.TempDir()
	r, err := begin(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.end()
	cleaned, err := Clean(dir)
	if err != nil || len(cleaned) != 0 {
		t.Fatalf("Clean() = %v, %v; want nothing cleaned", cleaned, err)
	}
	if _, err := os.Stat(r.Work); err != nil {
		t.Errorf("the live run's work directory is gone: %v", err)
	}
	bad := filepath.Join(runsDir(dir), "x.json")
	if err := os.WriteFile(bad, []byte(`{"id":"1-2","work":"/etc"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Clean(dir); err == nil || !strings.Contains(err.Error(), "x.json") {
		t.Errorf("Clean() with a record whose work directory is /etc: %v, want an error naming it", err)
	}
	if _, err := os.Stat("/etc"); err != nil {
		t.Fatal(err)
	}
	if err := r.end(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Work); !os.IsNotExist(err) {
		t.Errorf("end left the work directory: %v", err)
	}
}
