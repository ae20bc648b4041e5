//go:build integration

package kinds_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The contracts of the optional kind interfaces (kinds.go, inspect.go), checked for every
// registered kind that has one. Node kinds', on a node that TestNodeKindContract started and
// gave port p (eth1): checkRunning while it runs, checkStopping as it is stopped, prepareTwice
// before; MTUSetter in checkAddressesOnly. A link kind's TableReader in TestLinkKindContract
// (checkTable), Wire in TestWireKindContract; a tunnel kind's Counter in TestTunnelKindContract.
// TestOptionalInterfacesChecked (a unit test) fails when an interface is added without a check.

// checkRunning checks Measurer, Tasker, Namespaced, Runner, Terminal, Describer and Sweeper on
// running node in of kind k.
func checkRunning(t *testing.T, k kinds.Node, env *kinds.Env, in kinds.Instance, n *plan.Node, p plan.Port) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a session that hangs fails
	defer cancel()
	var use kinds.Usage
	if m, ok := k.(kinds.Measurer); ok {
		var err error
		use, err = m.Usage(env, in)
		if errors.Is(err, cgroup.ErrNoCgroups) {
			t.Logf("Measurer: not checked: %v", err) // a machine without usable cgroups measures nothing
		} else if err != nil || use.Processes < 1 || use.Memory == 0 {
			t.Errorf("Measurer: Usage of a running node = %+v, %v; want at least one process and some memory", use, err)
		}
	}
	if tk, ok := k.(kinds.Tasker); ok {
		if tasks := tk.Tasks(n); tasks < 1 || use.Processes > int64(tasks) {
			t.Errorf("Tasker: Tasks = %d, and the idle node holds %d tasks (Measurer); want at least 1 and what it holds", tasks, use.Processes)
		}
	}
	if nk, ok := k.(kinds.Namespaced); ok {
		checkNamespaced(t, nk, in, p)
	}
	if r, ok := k.(kinds.Runner); ok {
		var out strings.Builder
		code, err := r.Run(ctx, env, in, []string{"sh", "-c", "cat; echo to-err >&2; exit 3"}, strings.NewReader("in\n"), &out, &out)
		if err != nil || code != 3 || !strings.Contains(out.String(), "in\n") || !strings.Contains(out.String(), "to-err") {
			t.Errorf("Runner: Run = %d, %v, output %q; want exit code 3 with stdin copied out and stderr", code, err, out.String())
		}
	}
	if tm, ok := k.(kinds.Terminal); ok {
		var out strings.Builder
		resize := make(chan [2]uint16)
		close(resize)
		code, err := tm.Attach(ctx, env, in, []string{"sh", "-c", "stty size; exit 4"}, [2]uint16{33, 101}, strings.NewReader(""), &out, resize)
		if err != nil || code != 4 || !strings.Contains(out.String(), "33 101") {
			t.Errorf("Terminal: Attach = %d, %v, output %q; want exit code 4 on a terminal of 33 rows, 101 columns", code, err, out.String())
		}
	}
	if d, ok := k.(kinds.Describer); ok {
		checkDescriber(t, d, env, in, p)
	}
	if s, ok := k.(kinds.Sweeper); ok {
		// What a running node keeps is kept: it still runs, and what it uses is still read.
		for i := range 2 {
			if err := s.Sweep(env, map[string]kinds.Instance{n.Name: in}); err != nil {
				t.Errorf("Sweeper: Sweep #%d with the node running: %v", i+1, err)
			}
		}
		if running, _ := k.Running(env); running[n.Name].PID != in.PID {
			t.Errorf("Sweeper: after Sweep with the node running, Running = %v; want it still running", running)
		}
		if m, ok := k.(kinds.Measurer); ok {
			if u, err := m.Usage(env, in); err != nil || u.Processes < 1 {
				t.Errorf("Sweeper: after Sweep with the node running, Usage = %+v, %v; want what it uses kept", u, err)
			}
		}
	}
}

// checkNamespaced: Netns opens the node's network namespace, where the port's interface is.
func checkNamespaced(t *testing.T, nk kinds.Namespaced, in kinds.Instance, p plan.Port) {
	t.Helper()
	ns, err := nk.Netns(in)
	if err != nil {
		t.Errorf("Namespaced: Netns: %v", err)
		return
	}
	defer ns.Close()
	self, _ := netns.Get()
	defer self.Close()
	if ns.Equal(self) {
		t.Errorf("Namespaced: Netns is the machine's own namespace")
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.LinkByName(p.Ifname); err != nil {
		t.Errorf("Namespaced: the node's namespace has no %s: %v", p.Ifname, err)
	}
}

// checkDescriber: Describe lists the port's interface as the node sees it, with its address.
func checkDescriber(t *testing.T, d kinds.Describer, env *kinds.Env, in kinds.Instance, p plan.Port) {
	t.Helper()
	det, err := d.Describe(context.Background(), env, in)
	if err != nil {
		t.Errorf("Describer: Describe: %v", err)
		return
	}
	for _, i := range det.Interfaces {
		if i.Name == p.Ifname {
			if !strings.Contains(strings.Join(i.Addresses, " "), "10.0.0.") {
				t.Errorf("Describer: %s has addresses %v; want the one Configure gave it", p.Ifname, i.Addresses)
			}
			return
		}
	}
	t.Errorf("Describer: Describe lists %+v; want %s among them", det.Interfaces, p.Ifname)
}

// checkStopping stops node in of kind k: an Ender's End first (twice: idempotent), then Stop
// twice; a Sweeper's Sweep of a network with no node running twice after.
func checkStopping(t *testing.T, k kinds.Node, env *kinds.Env, in kinds.Instance) {
	t.Helper()
	ctx := context.Background()
	if e, ok := k.(kinds.Ender); ok {
		for i := range 2 {
			if err := e.End(env, in); err != nil {
				t.Errorf("Ender: End #%d: %v", i+1, err)
			}
		}
	}
	for i := range 2 {
		if err := k.Stop(ctx, env, in); err != nil {
			t.Errorf("Stop #%d: %v", i+1, err)
		}
	}
	if s, ok := k.(kinds.Sweeper); ok {
		for i := range 2 {
			if err := s.Sweep(env, nil); err != nil {
				t.Errorf("Sweeper: Sweep #%d with no node running: %v", i+1, err)
			}
		}
		if m, ok := k.(kinds.Measurer); ok {
			if u, err := m.Usage(env, in); err == nil && u.Processes > 0 {
				t.Errorf("Sweeper: after Stop and Sweep, Usage = %+v; want nothing of the node left", u)
			}
		}
	}
}

// checkTable: a TableReader reads the table of a joined link through a member, with no error,
// and its size limit.
func checkTable(t *testing.T, tr kinds.TableReader, l *plan.Link, m kinds.Members) {
	t.Helper()
	members := map[int]string{}
	for i, p := range m.Ports {
		members[p.Attrs().Index] = l.Ports[i].String()
	}
	ti := tr.ReadTable(l, m.Ports[0].Attrs().Index, members)
	if ti == nil || ti.Error != "" || ti.Table < 1 || ti.Ageing <= 0 {
		t.Errorf("TableReader: ReadTable of a joined link = %+v; want its table, with a size limit and an ageing time", ti)
	}
}

// prepareTwice checks that a Preparer's Prepare twice is Prepare once.
func prepareTwice(t *testing.T, p kinds.Preparer, env *kinds.Env) {
	t.Helper()
	for i := range 2 {
		if err := p.Prepare(context.Background(), env); err != nil {
			t.Fatalf("Preparer: Prepare #%d (scripts/setup.sh installs what kinds need): %v", i+1, err)
		}
	}
}
