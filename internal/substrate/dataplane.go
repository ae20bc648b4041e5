package substrate

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/tablesock"
)

// ErrNoProgram is returned for a node that has no dataplane program, or none running.
var ErrNoProgram = errors.New("no dataplane program")

var (
	objectsMu sync.Mutex
	objects   = map[[32]byte][]byte{} // compiled programs by their C source and path, per process
)

// programObject returns the eBPF object of a node's dataplane program: compiled from C
// (once per process for one source), or the file itself.
func programObject(ctx context.Context, d *spec.Dataplane) ([]byte, error) {
	if d.Object {
		return d.Source, nil
	}
	key := sha256.Sum256(append([]byte(d.Path+"\x00"), d.Source...))
	objectsMu.Lock()
	obj, ok := objects[key]
	objectsMu.Unlock()
	if ok {
		return obj, nil
	}
	obj, err := dataplane.CompileUser(ctx, d.Path, d.Source)
	if err != nil {
		return nil, err
	}
	objectsMu.Lock()
	objects[key] = obj
	objectsMu.Unlock()
	return obj, nil
}

// loadProgram compiles and loads node n's program: the kernel's verifier checks it. It
// shares the maps of prev (the program running now, or nil) that have its maps' layouts.
func loadProgram(ctx context.Context, n *plan.Node, prev *dataplane.UserProgram) (*dataplane.UserProgram, error) {
	obj, err := programObject(ctx, n.Dataplane)
	if err != nil {
		return nil, err
	}
	return dataplane.LoadUser(n.Dataplane.Path, obj, prev)
}

// checkPrograms compiles and verifies every dataplane program of plan p before anything
// changes: a program that does not compile, or that the verifier refuses, refuses the plan.
func checkPrograms(p *plan.Plan, n *spec.Network) error {
	for _, nd := range p.Nodes {
		if nd.Dataplane == nil {
			continue
		}
		u, err := loadProgram(context.Background(), nd, nil)
		if err != nil {
			head, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "dataplane: "), "\n")
			return &programError{at: n.NodeError(nd.Node, "dataplane", strings.TrimSuffix(head, ":"), "fix the program (docs/ebpf-nodes.md)"), err: err}
		}
		u.Close()
	}
	return nil
}

// programError is a program refused by clang or the kernel: where the file names it, on one
// line, then clang's or the verifier's messages as they gave them, which name the program's
// file and lines.
type programError struct {
	at  *spec.Error
	err error
}

func (e *programError) Error() string {
	_, detail, _ := strings.Cut(e.err.Error(), "\n")
	return e.at.Error() + "\n" + detail
}

func (e *programError) Unwrap() []error { return []error{e.at, e.err} }

// programPorts returns node's ports on this machine: port number -> substrate ifindex.
func programPorts(p *plan.Plan, node string) (map[int]int, error) {
	out := map[int]int{}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Node != node {
				continue
			}
			num, _ := spec.DataplanePort(port.Ifname) // checked with the file
			dev, err := netdev.ByName(port.Name)
			if err != nil {
				return nil, err
			}
			if dev == nil {
				continue // not made (yet)
			}
			out[num] = dev.Attrs().Index
		}
	}
	return out, nil
}

// convergePrograms puts each node's program on its ports, after the links (the ports exist):
// the same program stays with its tables, a changed one replaces it.
func (a *applier) convergePrograms(ctx context.Context) error {
	for _, nd := range a.env.Plan.Nodes {
		if nd.Dataplane == nil {
			continue
		}
		if err := convergeProgram(ctx, a.env.Plan, nd); err != nil {
			return fmt.Errorf("node %s: %w", nd.Name, err)
		}
	}
	return a.convergeTableServers(ctx)
}

// convergeTableServers runs the table server (internal/tablesock) of each node with a program,
// and ends those of the nodes that have none now.
func (a *applier) convergeTableServers(ctx context.Context) error {
	p := a.env.Plan
	if !hasProgram(p) {
		return nil // a server ends with its node, and a node that loses its program restarts
	}
	keep := map[string]bool{}
	for _, nd := range p.Nodes {
		keep[nd.Name] = nd.Dataplane != nil
	}
	if err := tablesock.KillExcept(a.env.Store.ID, p.NetID, keep); err != nil {
		return err
	}
	for _, nd := range p.Nodes {
		in, ok := a.running[nd.Name]
		if nd.Dataplane == nil || !ok {
			continue
		}
		c := tablesock.Config{Node: nd.Name, PID: in.PID}
		for _, l := range p.Links {
			for _, port := range l.Ports {
				if port.Node == nd.Name {
					c.Ports = append(c.Ports, port.Name)
				}
			}
		}
		sort.Strings(c.Ports)
		if err := tablesock.Ensure(ctx, a.env.Store.ID, p.NetID, c); err != nil {
			return err
		}
	}
	return nil
}

// convergeProgram loads node nd's program, sharing the running one's tables of the same
// layouts, and puts it on the node's ports.
func convergeProgram(ctx context.Context, p *plan.Plan, nd *plan.Node) error {
	ports, err := programPorts(p, nd.Name)
	if err != nil {
		return err
	}
	cur, err := dataplane.OpenUser(slices.Collect(maps.Values(ports)))
	if err != nil {
		return err
	}
	if cur != nil {
		defer cur.Close()
	}
	u, err := loadProgram(ctx, nd, cur)
	if err != nil {
		return err
	}
	defer u.Close()
	return dataplane.InstallUser(u, cur, ports)
}

// programChanges lists the nodes whose program differs from the one last applied.
func programChanges(old, p *plan.Plan) []Change {
	var out []Change
	for _, nd := range p.Nodes {
		on := nodeOf(old, nd.Name)
		if nd.Dataplane == nil || on == nil || on.Dataplane == nil || string(on.Dataplane.Source) == string(nd.Dataplane.Source) {
			continue
		}
		out = append(out, Change{Op: "change", Object: "program", Name: nd.Name, What: []string{"program " + nd.Dataplane.Program}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// hasProgram tells whether a node of plan p has a dataplane program.
func hasProgram(p *plan.Plan) bool {
	return slices.ContainsFunc(p.Nodes, func(nd *plan.Node) bool { return nd.Dataplane != nil })
}

// serverChanges are the changes `up` and `diff` show for the table servers of nodes with a
// program that do not run (killed), in a plan that is otherwise unchanged.
func serverChanges(stateID string, old, p *plan.Plan) ([]Change, error) {
	if old == nil || !hasProgram(p) {
		return nil, nil
	}
	found, err := tablesock.Servers(stateID, p.NetID)
	if err != nil {
		return nil, err
	}
	var out []Change
	for _, nd := range p.Nodes {
		if on := nodeOf(old, nd.Name); nd.Dataplane != nil && on != nil && on.Dataplane != nil {
			if _, ok := found[nd.Name]; !ok {
				out = append(out, Change{Op: "change", Object: "program", Name: nd.Name, What: []string{"its table server is not running: started again"}})
			}
		}
	}
	return out, nil
}

// NodeProgram opens the program running on node of a network on this machine, with its
// tables. The caller closes it.
func NodeProgram(st *state.Store, network, node string) (*dataplane.UserProgram, error) {
	rec, err := st.Load(network)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Plan == nil {
		return nil, fmt.Errorf("network %s is not up on this machine", network)
	}
	nd := rec.Plan.Node(node)
	switch {
	case nd == nil:
		return nil, fmt.Errorf("network %s has no node %s on this machine", network, node)
	case nd.Dataplane == nil:
		return nil, fmt.Errorf("%w: node %s of %s has none (add `dataplane: {program: FILE}` to it)", ErrNoProgram, node, network)
	}
	ports, err := programPorts(rec.Plan, node)
	if err != nil {
		return nil, err
	}
	u, err := dataplane.OpenUser(slices.Collect(maps.Values(ports)))
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, fmt.Errorf("%w running on node %s of %s: run `trellis up` to attach it", ErrNoProgram, node, network)
	}
	return u, nil
}
