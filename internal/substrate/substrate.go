// Package substrate converges one machine to its part of a virtual network: a reconciler that
// compares the desired state (the plan of the topology file for this machine) with the actual
// state (the network's record and the kernel) object by object, and applies only the
// difference, through the registered kinds (internal/kinds). Every step is idempotent, so an
// `up` after a crash at any moment converges; `down` removes everything of a network by its
// names, also what an interrupted `up` never recorded.
package substrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// Result says what Up did.
type Result struct {
	Created bool // the network was created
	Nodes   int  // nodes and links of the network on this machine
	Links   int
	Changes []Change // what was changed on a running network
	Took    time.Duration
}

// Up converges the machine to network n's plan for machine host ("" without hosts), which came
// from the topology file file, logging its progress to opt.Log. A new network is created; on
// one that is up, only what differs is changed, live. If creating fails half-way, everything
// created so far is removed; if a live change fails, the network is taken back to what it was.
func Up(ctx context.Context, st *state.Store, n *spec.Network, host, file string, opt Options) (*Result, error) {
	return up(ctx, st, n, host, file, false, opt)
}

// UpKeepLive is Up for a caller that applies one version of a file again and again, naming
// each version by a file of its own (the cluster's agent: a generation of a network, after a
// restart or a new placement of the same generation). When the network's record came from the
// same file, what was set live since (SetLinkState, SetImpairment) is kept instead of being
// taken back to the file's; from another file, the file's state is applied, as by Up.
func UpKeepLive(ctx context.Context, st *state.Store, n *spec.Network, host, file string, opt Options) (*Result, error) {
	return up(ctx, st, n, host, file, true, opt)
}

func up(ctx context.Context, st *state.Store, n *spec.Network, host, file string, keep bool, opt Options) (*Result, error) {
	start := time.Now()
	if err := resolveImages(ctx, n, opt, false); err != nil {
		return nil, err
	}
	unlock, err := st.Lock(n.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := st.Load(n.Name)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return create(ctx, st, n, host, file, start, opt)
	}
	return change(ctx, st, rec, n, host, file, start, keep, opt)
}

// create makes a new network: the record first, then every object.
func create(ctx context.Context, st *state.Store, n *spec.Network, host, file string, start time.Time, opt Options) (*Result, error) {
	names := &plan.Names{}
	p, err := plan.Make(n, st.ID, host, names)
	if err == nil {
		err = preflight(p, n, opt)
	}
	if err == nil {
		err = checkTasks(p.Network, p.Nodes)
	}
	if err == nil {
		err = prepare(ctx, opt.env(st, p), n)
	}
	if err != nil {
		st.Delete(n.Name) // the lock file just made: nothing else exists
		return nil, err
	}
	rec, err := saveNew(st, n, host, file, p, names)
	if err != nil {
		st.Delete(n.Name)
		return nil, err
	}
	noteDelays(nil, p, opt)
	p = rec.Plan
	env := opt.env(st, p)
	running, err := leftovers(ctx, env)
	if err != nil {
		return nil, err
	}
	if s := SnapshotFrom(ctx); s != nil && !s.empty(p.NetID) {
		ctx = WithSnapshot(ctx, nil) // leftovers may have deleted devices it holds: apply lists
	}
	env.Listed = SnapshotFrom(ctx).listed(p.NetID)
	made := opt
	made.created = true
	if err := apply(ctx, env, nil, rec, running, made); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted (%w); run `trellis up` again to finish, or `trellis down %s`", err, p.Network)
		}
		if cerr := remove(ctx, st, rec); cerr != nil {
			err = errors.Join(err, fmt.Errorf("and removing what was created failed too (run `trellis down %s`): %w", p.Network, cerr))
		}
		return nil, err
	}
	return &Result{Created: true, Nodes: len(p.Nodes), Links: len(p.Links), Took: time.Since(start)}, nil
}

// change converges a network that has a record: up, or interrupted while being created or
// changed. Only what differs from the record and the kernel is done.
// With keep, the live state of a record of the same file is kept (UpKeepLive).
func change(ctx context.Context, st *state.Store, rec *state.Record, n *spec.Network, host, file string, start time.Time, keep bool, opt Options) (*Result, error) {
	if rec.Names == nil {
		rec.Names = &plan.Names{}
	}
	names := rec.Names.Clone()
	names.NetID = rec.NetID
	p, err := plan.Make(n, st.ID, host, names)
	if err != nil {
		return nil, err
	}
	if keep && rec.File == file {
		keepLive(p, liveOf(rec))
		p.PlugPorts()
	}
	if err := preflight(p, n, opt); err != nil {
		return nil, err
	}
	if err := prepare(ctx, opt.env(st, p), n); err != nil {
		return nil, err
	}
	old := rec.Plan
	listed := SnapshotFrom(ctx).listed(p.NetID)
	running, err := findNodes(machineFrom(ctx), &kinds.Env{Store: st, Plan: p, Listed: listed})
	if err != nil {
		return nil, err
	}
	if err := checkTasks(p.Network, notRunning(p.Nodes, running)); err != nil {
		return nil, err
	}
	if rec.Status == state.Up { // re-plugging is refused before anything changes
		if err := keepPorts(rec, n, old, p, running, opt.Log); err != nil {
			return nil, err
		}
		if err := checkReplug(rec, old, p, running, opt); err != nil {
			return nil, err
		}
	}
	changes := Diff(old, p, digests(running))
	noteDelays(changes, p, opt)
	ec, err := engineChanges(st, old, p, recorded(rec, p), running)
	if err != nil {
		return nil, err
	}
	lc, err := lineChanges(st.ID, old, p, opt)
	if err != nil {
		return nil, err
	}
	sc, err := serverChanges(st.ID, old, p)
	if err != nil {
		return nil, err
	}
	changes = append(append(append(append(changes, ec...), lc...), programChanges(old, p)...), sc...)
	if len(changes) == 0 && rec.Status == state.Up {
		if rec.File != file { // the record says which file it holds (UpKeepLive relies on it)
			rec.File = file
			if err := st.Save(rec); err != nil {
				return nil, err
			}
		}
		return &Result{Took: time.Since(start)}, nil
	}
	prevStatus, prevFile := rec.Status, rec.File
	rec.File, rec.Names = file, names
	// A change that makes, deletes or restarts nothing (a link's rate, impairments or state)
	// allocates no names: a mark that the change is under way is enough, and costs less than
	// rewriting the record. If it is interrupted, the next up trusts only the kernel. A change
	// of addresses records its target: if it is interrupted, the addresses it placed are known
	// as trellis's (applier.placed).
	var err2 error
	if prevStatus == state.Up && settingsOnly(changes) {
		err2 = st.MarkChanging(rec.Name)
	} else {
		rec.Status, rec.Target = state.Changing, p
		if prevStatus == state.Creating {
			rec.Status = state.Creating
		}
		err2 = st.Save(rec)
	}
	if err2 != nil {
		return nil, err2
	}
	env := opt.env(st, p)
	env.Listed = listed
	if prevStatus != state.Up {
		old = nil // interrupted: trust nothing but the kernel
	}
	if err := apply(ctx, env, old, rec, running, opt); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted (%w); the network is partly changed: run `trellis up` again to finish", err)
		}
		if old == nil {
			return nil, fmt.Errorf("%w; the network is partly changed: run `trellis up` again to finish", err)
		}
		rec.File = prevFile // back to what it was, the file's version too
		return nil, rollback(ctx, st, rec, old, p, opt, err)
	}
	return &Result{Changes: changes, Took: time.Since(start)}, nil
}

// notRunning returns the nodes that have no running instance: those a change starts.
func notRunning(nodes []*plan.Node, running map[string]kinds.Instance) []*plan.Node {
	var out []*plan.Node
	for _, nd := range nodes {
		if _, ok := running[nd.Name]; !ok {
			out = append(out, nd)
		}
	}
	return out
}

// rollback takes a network whose live change to plan tried failed back to plan old. tried is
// recorded as the change's target, so that the addresses it placed are known to be trellis's.
// It acts on ctx's machine, even once ctx is cancelled.
func rollback(ctx context.Context, st *state.Store, rec *state.Record, old, tried *plan.Plan, opt Options, cause error) error {
	rec.Target = tried
	if err := apply(context.WithoutCancel(ctx), opt.env(st, old), nil, rec, nil, opt); err != nil {
		return errors.Join(cause, fmt.Errorf("and taking the network back to what it was failed too (run `trellis up` again): %w", err))
	}
	return fmt.Errorf("%w; the network was taken back to what it was", cause)
}

// Preview lists what Up of network n with opt would change on this machine, changing nothing.
func Preview(st *state.Store, n *spec.Network, host string, opt Options) ([]Change, error) {
	if err := resolveImages(context.Background(), n, opt, true); err != nil {
		return nil, err
	}
	rec, err := st.Load(n.Name)
	if err != nil {
		return nil, err
	}
	names, old := &plan.Names{}, (*plan.Plan)(nil)
	if rec != nil {
		if rec.Names != nil {
			names = rec.Names.Clone()
		}
		names.NetID, old = rec.NetID, rec.Plan
	}
	p, err := plan.Make(n, st.ID, host, names)
	if err != nil {
		return nil, err
	}
	if err := preflight(p, n, opt); err != nil {
		return nil, err
	}
	var running map[string]string
	if rec != nil {
		found, err := runningNodes(&kinds.Env{Store: st, Plan: p})
		if err != nil {
			return nil, err
		}
		running = digests(found)
		if rec.Status == state.Up { // as up does: a link keeps its ports rather than be refused
			if err := keepPorts(rec, n, old, p, found, nil); err != nil {
				return nil, err
			}
		}
		ec, err := engineChanges(st, old, p, recorded(rec, p), found)
		if err != nil {
			return nil, err
		}
		lc, err := lineChanges(st.ID, old, p, opt)
		if err != nil {
			return nil, err
		}
		sc, err := serverChanges(st.ID, old, p)
		if err != nil {
			return nil, err
		}
		changes := Diff(old, p, running)
		noteDelays(changes, p, opt)
		if rec.Status == state.Up {
			soft, err := replugs(rec, old, p, found)
			if err != nil {
				return nil, err
			}
			if len(soft) > 0 {
				changes = append(changes, Change{Op: "refuse", Object: "network", Name: n.Name,
					What: []string{"up refuses this without --replug, " + ErrReplug.Error() + ": " + refusal(soft)}})
			}
		}
		return append(append(append(append(changes, ec...), lc...), programChanges(old, p)...), sc...), nil
	}
	ec, err := engineChanges(st, old, p, nil, nil)
	if err != nil {
		return nil, err
	}
	changes := Diff(old, p, running)
	noteDelays(changes, p, opt)
	return append(changes, ec...), nil
}

// leftovers returns the nodes of a network being created that run already (an earlier up was
// killed after its record went). If none runs, the ports of a network of the same name that
// went down a moment ago may still be there, going with their namespaces: it waits for them.
// A Snapshot in ctx (WithSnapshot) in which the network has no process and no device spares
// both searches.
func leftovers(ctx context.Context, env *kinds.Env) (map[string]kinds.Instance, error) {
	if s := SnapshotFrom(ctx); s != nil && s.empty(env.Plan.NetID) {
		return map[string]kinds.Instance{}, nil
	}
	m := machineFrom(ctx)
	running, err := findNodes(m, env)
	if err != nil || len(running) > 0 {
		return running, err
	}
	return running, deleteDevices(m, env.Plan.NetID, portsGone)
}
