package substrate

import (
	"context"
	"fmt"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netns"
)

// wire converges a link of a wire kind (kinds.Wire: one veth pair between its two nodes, no
// port). A pair that is unchanged and whose nodes did not start anew is not touched. A pair the
// kind makes is configured whole by the node kinds (sysctls, addresses, up); a kept one only
// has its addresses changed if the plan's changed. Ports an old plan had for the link were
// deleted already (removeGone: the plan names none for it).
func (a *applier) wire(ctx context.Context, l, ol *plan.Link, w kinds.Wire) error {
	a.mu.Lock()
	fresh := a.fresh[l.Ports[0].Node] || a.fresh[l.Ports[1].Node]
	a.mu.Unlock()
	if ol != nil && sameLink(ol, l) && !fresh && !a.listed {
		return nil
	}
	a.joined.Add(1)
	var ns [2]netns.NsHandle
	for i, port := range l.Ports {
		h, err := a.netns(port)
		if err != nil {
			return fmt.Errorf("link %s: %w", l.Name, err)
		}
		defer h.Close()
		ns[i] = h
	}
	made, err := w.Wire(ctx, a.env, l, ns, linkMTU(l))
	if err != nil {
		return fmt.Errorf("link %s: %w", l.Name, err)
	}
	for _, port := range l.Ports {
		again, whole := a.reconfigure(port)
		if made || again {
			if err := a.addresses(ctx, port, made || whole); err != nil {
				return fmt.Errorf("link %s: %w", l.Name, err)
			}
		}
	}
	return nil
}

// netns opens the network namespace of a port's node (kinds.Namespaced).
func (a *applier) netns(port plan.Port) (netns.NsHandle, error) {
	n := a.env.Plan.Node(port.Node)
	k, err := kinds.NodeKind(n.Kind)
	if err != nil {
		return -1, err
	}
	nk, ok := k.(kinds.Namespaced)
	if !ok {
		return -1, fmt.Errorf("node %s: its kind %s has no network namespace for a direct link", n.Name, n.Kind)
	}
	a.mu.Lock()
	in := a.running[port.Node]
	a.mu.Unlock()
	return nk.Netns(in)
}

// Wired tells whether link l is joined by a wire kind, with no port in the substrate.
func Wired(l *plan.Link) bool {
	lk, err := kinds.LinkKind(l.Connector)
	if err != nil {
		return false
	}
	_, ok := lk.(kinds.Wire)
	return ok
}
