package substrate

import (
	"context"
	"fmt"
	"time"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
)

// Down removes network name from the machine: its nodes (with every process in them), its
// ports, connectors, tunnels, shapers and eBPF programs, and its record.
func Down(st *state.Store, name string) error {
	return down(context.Background(), st, name)
}

// down is Down on the machine in ctx (machineFrom).
func down(ctx context.Context, st *state.Store, name string) error {
	unlock, err := st.Lock(name)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := st.Load(name)
	if err != nil {
		return err
	}
	if rec == nil {
		st.Delete(name) // the lock file just made
		return fmt.Errorf("%w %s in %s", ErrNoNetwork, name, st.Dir)
	}
	return remove(ctx, st, rec)
}

// remove finds everything of a network by its names, not by the record alone, so that it also
// finds what an interrupted `up` made after its last save. It touches only nodes marked with
// this state directory and network, and devices named after this network. It goes on to the
// end when ctx is cancelled: it acts on ctx's machine (machineFrom).
func remove(ctx context.Context, st *state.Store, rec *state.Record) error {
	ctx, m := context.WithoutCancel(ctx), machineFrom(ctx)
	env := &kinds.Env{Store: st, Plan: rec.Plan}
	if err := m.EndHelpers(st.Dir, st.ID, rec.NetID); err != nil {
		return err
	}
	running, err := findNodes(m, env)
	if err != nil {
		return err
	}
	all := make([]kinds.Instance, 0, len(running))
	for _, in := range running {
		all = append(all, in)
	}
	if err := stopAll(ctx, env, all); err != nil {
		return err
	}
	if err := sweep(m, env, recorded(rec, rec.Plan), nil); err != nil {
		return err
	}
	// The ports in the network's port namespace (if it has one) go with it.
	if err := m.RemovePortNS(rec.NetID); err != nil {
		return err
	}
	for _, p := range []*plan.Plan{rec.Plan, rec.Target} {
		if err := guardEngines(st, p, false, nil); err != nil {
			return err
		}
		if err := removeTunnels(ctx, st, p); err != nil {
			return err
		}
	}
	// Ports vanish with their nodes' network namespaces, which the kernel frees in batches
	// after the nodes' processes have ended (above), on a worker of its own: down waits for
	// that while the kernel makes progress, and deletes the ports whose namespace something
	// still holds (a TCP connection a node left sending into a slow link keeps it for
	// minutes). What else remains (bridges, tunnel devices) is deleted at once.
	if err := deleteDevices(m, rec.NetID, portsStall); err != nil {
		return err
	}
	return st.Delete(rec.Name)
}

// stopAll stops nodes: those of kinds that can be ended without waiting all at once first
// (kinds.Ender), then each, on the worker pool.
func stopAll(ctx context.Context, env *kinds.Env, nodes []kinds.Instance) error {
	for _, in := range nodes {
		k, err := kinds.NodeKind(in.Kind)
		if err != nil {
			return err
		}
		if e, ok := k.(kinds.Ender); ok {
			if err := e.End(env, in); err != nil {
				return err
			}
		}
	}
	return parallel(len(nodes), func(i int) error {
		k, err := kinds.NodeKind(nodes[i].Kind)
		if err != nil {
			return err
		}
		return k.Stop(ctx, env, nodes[i])
	})
}

// removeTunnels has the tunnel kind undo what it made for plan p's links (nil: nothing).
func removeTunnels(ctx context.Context, st *state.Store, p *plan.Plan) error {
	if p == nil || p.Tunnel == "" {
		return nil
	}
	tk, err := kinds.TunnelKind(p.Tunnel)
	if err != nil {
		return err
	}
	env := &kinds.Env{Store: st, Plan: p}
	for _, l := range p.Links {
		if len(l.Tunnels) > 0 {
			if err := tk.Remove(ctx, env, l); err != nil {
				return fmt.Errorf("link %s: %w", l.Name, err)
			}
		}
	}
	return nil
}

// portsGone is how long deleteDevices waits at most for the kernel to delete ports itself.
const portsGone = 10 * time.Second

// portsStall is how long down waits for the kernel to delete another port before it deletes
// those left itself.
const portsStall = time.Second

// deleteDevices deletes the substrate devices of network netID but its container ports, which
// the kernel deletes itself with the network namespaces of their nodes once these have ended.
// It waits for those ports to go too, at most portsGone in all and stall without one going,
// then deletes the ports left (their namespace is held by some process or socket).
func deleteDevices(m machine, netID string, stall time.Duration) error {
	start := time.Now()
	deadline, lastGone, lastPorts := start.Add(portsGone), start, -1
	for {
		devs, err := devicesOf(m, netID)
		if err != nil {
			return err
		}
		now := time.Now()
		late, ports := now.After(deadline) || now.Sub(lastGone) > stall, 0
		for _, d := range devs {
			if plan.DeviceKind(d.Attrs().Name) == 'p' && !late {
				ports++
				continue
			}
			if err := m.DeleteDevice(d.Attrs().Name); err != nil {
				return err
			}
		}
		if ports == 0 {
			return nil
		}
		if ports != lastPorts {
			lastGone, lastPorts = now, ports
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func devicesOf(m machine, netID string) ([]netlink.Link, error) {
	links, err := m.Devices()
	if err != nil {
		return nil, err
	}
	var out []netlink.Link
	for _, l := range links {
		if plan.DeviceNetID(l.Attrs().Name) == netID {
			out = append(out, l)
		}
	}
	return out, nil
}
