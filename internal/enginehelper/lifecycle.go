package enginehelper

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/trellisnet/trellis/internal/helperproc"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
)

// Start starts the helper of configuration c and returns its pid once its FEs are made, its
// programs attached and the control node's routes and neighbours mirrored. The helper outlives
// trellis.
func Start(ctx context.Context, stateID string, c Config) (int, error) {
	pid, err := helperproc.Start(ctx, Marker(stateID, c), c, helpers.Timeout)
	if err != nil {
		return 0, fmt.Errorf("%w for node %s: %v", ErrHelper, c.Node, err)
	}
	return pid, nil
}

// Kill ends helpers and waits until they are gone (their FEs go with them).
func Kill(pids ...int) error { return helpers.Kill(pids...) }

// Pending lists the nodes of plan p whose engines are not running as configured (running gives
// each running node's init pid), and the nodes whose helper should go, with why.
func Pending(stateDir, stateID string, p *plan.Plan, running map[string]int) (map[string]string, error) {
	found, err := Find(stateID, p.NetID)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range p.Nodes {
		if len(n.Engines) == 0 {
			continue
		}
		h, ok := found[n.Name]
		c, err := ConfigFor(stateDir, p, n, running[n.Name])
		switch {
		case err != nil:
			return nil, err
		case !ok:
			out[n.Name] = "they are not running"
		case h.Digest != c.Digest():
			out[n.Name] = "their node, ports or settings changed"
		}
	}
	for _, hn := range p.Hosted {
		h, ok := found[hn.Node]
		switch {
		case !ok:
			out[hn.Node] = "its engines held here are not running"
		case h.Digest != HostedConfig(stateDir, p, hn).Digest():
			out[hn.Node] = "its engines held here changed"
		}
	}
	for name := range found {
		if !wanted(p, name) {
			out[name] = "the node has no engines any more"
		}
	}
	return out, nil
}

// Converge makes the engines of plan p's nodes run as configured: a helper that is missing is
// started, one whose configuration changed is replaced, one of a node without engines (or gone)
// is killed. running gives each running node's init pid.
func Converge(ctx context.Context, stateDir, stateID string, p *plan.Plan, running map[string]int) error {
	found, err := Find(stateID, p.NetID)
	if err != nil {
		return err
	}
	for name, h := range found {
		if !wanted(p, name) {
			if err := Kill(h.PID); err != nil {
				return err
			}
			removePorts(stateDir, p.NetID, name)
			os.Remove(StatusPath(stateDir, p.NetID, name))
		}
	}
	for _, hn := range p.Hosted {
		if err := replace(ctx, stateID, found, HostedConfig(stateDir, p, hn)); err != nil {
			return fmt.Errorf("engines of node %s held here: %w", hn.Node, err)
		}
	}
	for _, n := range p.Nodes {
		if len(n.Engines) == 0 {
			continue
		}
		pid, ok := running[n.Name]
		if !ok {
			return fmt.Errorf("%w %s is not running", ErrControl, n.Name)
		}
		c, err := ConfigFor(stateDir, p, n, pid)
		if err != nil {
			return err
		}
		if err := replace(ctx, stateID, found, c); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

// replace starts the helper of configuration c unless found has it running, killing one of
// another configuration first.
func replace(ctx context.Context, stateID string, found map[string]Helper, c Config) error {
	h, ok := found[c.Node]
	if ok && h.Digest == c.Digest() {
		return nil
	}
	if ok {
		if err := Kill(h.PID); err != nil {
			return err
		}
	}
	_, err := Start(ctx, stateID, c)
	return err
}

// wanted tells whether plan p has a helper for node name: its engines, or engines held here.
func wanted(p *plan.Plan, name string) bool {
	if n := p.Node(name); n != nil && len(n.Engines) > 0 {
		return true
	}
	return p.HostedNode(name) != nil
}

// removePorts deletes the substrate ends of node's engines on other machines that its status
// names: VXLAN devices, which, unlike a veth end, do not go with the helper's namespaces.
func removePorts(stateDir, netID, node string) {
	s, err := ReadStatus(stateDir, netID, node)
	if err != nil || s == nil {
		return
	}
	for _, e := range s.Engines {
		if e.Host == "" {
			continue
		}
		for _, port := range e.Ports {
			netdev.Delete(port)
		}
	}
}

// Remove kills every helper of network netID and removes their status files. Their FEs and
// the FEs' devices go with them.
func Remove(stateDir, stateID, netID string) error {
	found, err := Find(stateID, netID)
	if err != nil {
		return err
	}
	var pids []int
	for _, h := range found {
		pids = append(pids, h.PID)
	}
	if err := Kill(pids...); err != nil {
		return err
	}
	for name := range found {
		removePorts(stateDir, netID, name)
	}
	if err := os.RemoveAll(StatusDir(stateDir, netID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
