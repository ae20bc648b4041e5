package substrate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
)

// applier converges the machine from plan old (what was last applied; nil when nothing can
// be trusted but the kernel) to env.Plan.
type applier struct {
	m   machine // what the reconciler changes itself (machine.go)
	env *kinds.Env
	opt Options // the choices of the caller (port namespace, delay way, hook)
	old *plan.Plan
	mu  sync.Mutex
	// recorded are the plans the network's record holds besides env.Plan (the last applied, a
	// change's target), for sweeping and finding engine helpers.
	recorded []*plan.Plan
	running  map[string]kinds.Instance // nodes running now, by name
	fresh    map[string]bool           // nodes started by this apply
	known    map[string]bool           // this network's substrate devices that exist, by name
	// listed: known was read from the kernel (listDevices), so a port it lacks is made by
	// this apply, and configured by the node kind as it makes it (kinds.Node.Port).
	listed bool
	made   map[string]bool // ports made by this apply, configured already (listed only)
	// carriers are the joined ports to bring up or down once every link is joined.
	carriers []carrier
	portNS   portsIn // where the network's ports are (portns.go)
	// What this apply did, for the progress lines.
	stopped, removed, started, joined, carried atomic.Int64
}

// apply converges the machine to env.Plan and records it in rec: stop the nodes that go or
// restart, delete the devices the plan no longer has, start nodes, make and join every link
// that is new or changed, then run the start commands of the nodes just started.
// running holds the nodes that run now (nil: find them).
func apply(ctx context.Context, env *kinds.Env, old *plan.Plan, rec *state.Record, running map[string]kinds.Instance, opt Options) error {
	a := &applier{m: machineFrom(ctx), env: env, opt: opt, old: old, recorded: recorded(rec, env.Plan), fresh: map[string]bool{}, running: running, made: map[string]bool{}}
	if a.running == nil {
		var err error
		if a.running, err = findNodes(a.m, env); err != nil {
			return err
		}
	}
	if err := a.openPorts(); err != nil {
		return err
	}
	defer a.portNS.close()
	restartUnfinished(a.running, rec)
	if err := a.markStarting(rec); err != nil {
		return err
	}
	p := env.Plan
	steps := []struct {
		what  string
		n     int
		f     func(i int) error
		count *atomic.Int64
	}{
		{"nodes stopped", 1, func(int) error {
			if err := a.stopNodes(ctx); err != nil {
				return err
			}
			return sweep(a.m, env, a.recorded, a.running)
		}, &a.stopped},
		{"devices removed", 1, func(int) error { return a.portNS.do(func() error { return a.removeGone(ctx) }) }, &a.removed},
		{"nodes started", len(p.Nodes), func(i int) error { return a.startNode(ctx, p.Nodes[i]) }, &a.started},
		{"links made or changed", len(p.Links), func(i int) error { return a.link(ctx, p.Links[i]) }, &a.joined},
		{"ports brought up or down", 1, func(int) error { return a.setCarriers(ctx) }, &a.carried},
	}
	log := logline.OrDiscard(env.Log)
	for _, s := range steps {
		t0 := time.Now()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := parallelShown(log, s.what, s.n, s.f); err != nil {
			return err
		}
		took := time.Since(t0).Seconds()
		log.Info(fmt.Sprintf("%d %s in %.3fs", s.count.Load(), s.what, took), "step", s.what, "count", s.count.Load(), "seconds", took)
	}
	if err := a.convergeLines(ctx); err != nil {
		return err
	}
	if err := a.convergeEngines(ctx); err != nil {
		return err
	}
	if err := a.convergePrograms(ctx); err != nil {
		return err
	}
	rec.Nodes = map[string]int{}
	for name, in := range a.running {
		rec.Nodes[name] = in.PID
	}
	if len(a.fresh) > 0 {
		// Record the pids before running user commands, which may take long.
		if err := env.Store.Save(rec); err != nil {
			return err
		}
	}
	if err := parallelShown(log, "start commands", len(p.Nodes), func(i int) error { return a.exec(ctx, p.Nodes[i]) }); err != nil {
		return err
	}
	rec.Plan, rec.Target, rec.Status, rec.Starting = p, nil, state.Up, nil
	rec.Names.Keep(p)
	return env.Store.Save(rec)
}

// restartUnfinished marks the running nodes whose start commands an interrupted apply began
// (rec.Starting) as not running as planned, so that this apply stops and starts them again and
// runs their start commands from the first: what ran of them is not known.
func restartUnfinished(running map[string]kinds.Instance, rec *state.Record) {
	if rec == nil {
		return
	}
	for _, name := range rec.Starting {
		if in, ok := running[name]; ok {
			in.Digest = kinds.PartGone
			running[name] = in
		}
	}
}

// markStarting records the nodes this apply starts (rec.Starting) before it starts any: if it
// is interrupted before their start commands have all run, the next apply starts them again.
func (a *applier) markStarting(rec *state.Record) error {
	var names []string
	for _, n := range a.env.Plan.Nodes {
		if in, ok := a.running[n.Name]; !ok || in.Digest != n.Digest {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	rec.Starting = names
	return a.env.Store.Save(rec)
}

// RunningNodes finds the running nodes of the network recorded in rec, of every kind.
func RunningNodes(st *state.Store, rec *state.Record) (map[string]kinds.Instance, error) {
	return runningNodes(&kinds.Env{Store: st, Plan: rec.Plan})
}

// runningNodes finds the network's running nodes of every kind on this machine.
func runningNodes(env *kinds.Env) (map[string]kinds.Instance, error) {
	return findNodes(hostMachine{}, env)
}

// findNodes finds the network's running nodes of every kind of machine m.
func findNodes(m machine, env *kinds.Env) (map[string]kinds.Instance, error) {
	out := map[string]kinds.Instance{}
	for _, k := range m.NodeKinds() {
		found, err := k.Running(env)
		if err != nil {
			return nil, err
		}
		for name, in := range found {
			out[name] = in
		}
	}
	return out, nil
}

// sweep has the node kinds remove what they keep for nodes that do not run (kinds.Sweeper),
// telling them the plans the network's record holds besides env.Plan.
func sweep(m machine, env *kinds.Env, recorded []*plan.Plan, running map[string]kinds.Instance) error {
	senv := *env
	senv.Recorded = recorded
	for _, k := range m.NodeKinds() {
		if s, ok := k.(kinds.Sweeper); ok {
			if err := s.Sweep(&senv, running); err != nil {
				return err
			}
		}
	}
	return nil
}

func digests(running map[string]kinds.Instance) map[string]string {
	out := make(map[string]string, len(running))
	for name, in := range running {
		out[name] = in.Digest
	}
	return out
}

// stopNodes stops the running nodes that the plan does not have, or has with other settings,
// and deletes the ports of those that will start again, so their names are free at once
// (the kernel frees a dead node's namespace, and its ports, a little later).
func (a *applier) stopNodes(ctx context.Context) error {
	var stop []kinds.Instance
	for name, in := range a.running {
		if n := a.env.Plan.Node(name); n == nil || n.Digest != in.Digest {
			stop = append(stop, in)
		}
	}
	if err := stopAll(ctx, a.env, stop); err != nil {
		return err
	}
	a.stopped.Add(int64(len(stop)))
	return a.portNS.do(func() error { // where the ports are
		for _, in := range stop {
			delete(a.running, in.Name)
			for _, l := range a.env.Plan.Links {
				for _, port := range l.Ports {
					if port.Node == in.Name {
						if err := a.m.DeleteDevice(port.Name); err != nil {
							return err
						}
					}
				}
			}
		}
		return nil
	})
}

// removeGone undoes what the old plan has and the new one has not: tunnels that go (through
// their kind) and connectors that change kind, then deletes every device of the network that
// the plan does not name. Without an old plan it lists the network's devices in the kernel;
// with one, it knows them from the old plan.
func (a *applier) removeGone(ctx context.Context) error {
	p := a.env.Plan
	if a.old == nil {
		if err := a.listDevices(ctx); err != nil {
			return err
		}
	} else {
		// Ports of nodes that stopped, or are not running (they died, or the machine
		// restarted), went with their nodes.
		a.known = deviceNames(a.old)
		for _, n := range a.old.Nodes {
			if _, ok := a.running[n.Name]; ok {
				continue
			}
			for name := range portsOf(a.old, n.Name) {
				if err := a.m.DeleteDevice(name); err != nil {
					return err
				}
				delete(a.known, name)
			}
		}
		for _, ol := range a.old.Links {
			if err := a.removeOldParts(ctx, ol, p.Link(ol.Name)); err != nil {
				return fmt.Errorf("link %s: %w", ol.Name, err)
			}
		}
	}
	keep := deviceNames(p)
	for name := range a.known {
		if !keep[name] {
			if err := a.m.DeleteDevice(name); err != nil {
				return err
			}
			delete(a.known, name)
			a.removed.Add(1)
		}
	}
	return nil
}

// portsOf returns the names of the ports of node name in plan p.
func portsOf(p *plan.Plan, name string) map[string]bool {
	out := map[string]bool{}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Node == name {
				out[port.Name] = true
			}
		}
	}
	return out
}

// removeOldParts removes what of old link ol the new link nl (nil if it goes) does not keep.
func (a *applier) removeOldParts(ctx context.Context, ol, nl *plan.Link) error {
	gone := *ol
	gone.Tunnels = nil
	for _, t := range ol.Tunnels {
		if nl == nil || !a.old.SameTunnel(a.env.Plan) || !hasTunnel(nl, t) {
			gone.Tunnels = append(gone.Tunnels, t)
		}
	}
	if len(gone.Tunnels) > 0 {
		tk, err := kinds.TunnelKind(a.old.Tunnel)
		if err != nil {
			return err
		}
		if err := tk.Remove(ctx, a.opt.env(a.env.Store, a.old), &gone); err != nil {
			return err
		}
	}
	if nl == nil {
		return nil // the sweep deletes its devices
	}
	if nl.Connector != ol.Connector {
		lk, err := kinds.LinkKind(ol.Connector)
		if err != nil {
			return err
		}
		m, err := a.members(ol)
		if err != nil {
			return err
		}
		if err := lk.Leave(ctx, a.env, ol, m); err != nil {
			return err
		}
	}
	return nil
}

func hasTunnel(l *plan.Link, t plan.Tunnel) bool {
	for _, x := range l.Tunnels {
		if x == t {
			return true
		}
	}
	return false
}

// listDevices finds the network's devices in the substrate: in ctx's Snapshot if it has one
// and the network's ports are in the root namespace, else by listing where its ports are.
func (a *applier) listDevices(ctx context.Context) error {
	s := SnapshotFrom(ctx)
	if s == nil || a.portNS.set { // a snapshot lists the root namespace, not a port namespace
		var err error
		if s, err = deviceSnapshot(a.m); err != nil {
			return err
		}
	}
	a.known, a.listed = map[string]bool{}, true
	for _, name := range s.devices(a.env.Plan.NetID) {
		a.known[name] = true
	}
	return nil
}

// deviceNames are the substrate devices plan p may hold.
func deviceNames(p *plan.Plan) map[string]bool {
	out := map[string]bool{}
	for _, l := range p.Links {
		out[l.Device] = true
		for _, port := range l.Ports {
			if !Wired(l) { // a direct link has none: the ports it had go (it is re-plugged)
				out[port.Name] = true
			}
		}
		for _, t := range l.Tunnels {
			out[t.Device], out[t.Encap] = true, true
		}
	}
	for name := range delayDevices(p) {
		out[name] = true
	}
	for _, n := range p.Nodes {
		for _, m := range n.FEPorts {
			for _, name := range m {
				out[name] = true
			}
		}
	}
	return out
}

// members returns the devices of link l that exist now.
func (a *applier) members(l *plan.Link) (kinds.Members, error) {
	var m kinds.Members
	for _, port := range l.Ports {
		d, err := a.m.Device(port.Name)
		if err != nil {
			return m, err
		}
		if d != nil {
			m.Ports = append(m.Ports, d)
		}
	}
	for _, t := range l.Tunnels {
		d, err := a.m.Device(t.Device)
		if err != nil {
			return m, err
		}
		if d != nil {
			m.Tunnels = append(m.Tunnels, d)
		}
	}
	return m, nil
}

// startNode starts a node of the plan that is not running.
func (a *applier) startNode(ctx context.Context, n *plan.Node) error {
	a.mu.Lock()
	_, ok := a.running[n.Name]
	a.mu.Unlock()
	if ok {
		return nil
	}
	k, err := kinds.NodeKind(n.Kind)
	if err != nil {
		return err
	}
	in, err := k.Start(ctx, a.env, n)
	a.started.Add(1)
	if in.PID != 0 { // recorded even if setting it up failed, so that it is stopped again
		a.mu.Lock()
		a.running[n.Name], a.fresh[n.Name] = in, true
		a.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// exec runs the start commands of a node started by this apply.
func (a *applier) exec(ctx context.Context, n *plan.Node) error {
	if !a.fresh[n.Name] {
		return nil
	}
	k, err := kinds.NodeKind(n.Kind)
	if err != nil {
		return err
	}
	if err := k.Exec(ctx, a.env, a.running[n.Name], n); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// recorded returns the plans of record rec (the last applied, a change's target) other than p.
func recorded(rec *state.Record, p *plan.Plan) []*plan.Plan {
	if rec == nil {
		return nil
	}
	var out []*plan.Plan
	for _, r := range []*plan.Plan{rec.Plan, rec.Target} {
		if r != nil && r != p {
			out = append(out, r)
		}
	}
	return out
}
