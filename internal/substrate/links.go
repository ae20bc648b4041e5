package substrate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netlink"
)

// link converges one link where the network's ports are (linkHere).
func (a *applier) link(ctx context.Context, l *plan.Link) error {
	return a.portNS.do(func() error { return a.linkHere(ctx, l) })
}

// linkHere converges one link: it makes the ports that are missing (a new link or member, or a
// node started anew), and if anything of the link is new or changed, ensures its tunnels, then
// sets its shapers, joins its connector, sets impairments and finally the carrier state. A link
// that is unchanged and whole is not touched.
func (a *applier) linkHere(ctx context.Context, l *plan.Link) error {
	var ol *plan.Link
	if a.old != nil && a.old.SameTunnel(a.env.Plan) {
		ol = a.old.Link(l.Name)
	}
	if lk, err := kinds.LinkKind(l.Connector); err == nil {
		if w, ok := lk.(kinds.Wire); ok {
			return a.wire(ctx, l, ol, w)
		}
	}
	_, ports, err := a.ports(ctx, l, ol == nil || !sameLink(ol, l))
	if err != nil {
		return fmt.Errorf("link %s: %w", l.Name, err)
	}
	if ports == nil {
		return nil // unchanged and whole
	}
	a.joined.Add(1)
	if err := a.join(ctx, l, ports); err != nil {
		return fmt.Errorf("link %s: %w", l.Name, err)
	}
	return nil
}

// ports makes the link's ports that are missing, and returns them all if any was made or
// the link changed (changed), each with the link's MTU; otherwise it touches nothing and
// returns none.
func (a *applier) ports(ctx context.Context, l *plan.Link, changed bool) (bool, []netlink.Link, error) {
	made := false
	out := make([]netlink.Link, len(l.Ports)) // the ports made here, as Port returned them
	for i, port := range l.Ports {
		a.mu.Lock()
		known := a.known[port.Name]
		a.mu.Unlock()
		if known {
			continue
		}
		var err error
		if out[i], err = a.makePort(ctx, l, port); err != nil {
			return made, nil, err
		}
		made = true
	}
	if !made && !changed {
		return false, nil, nil
	}
	for i, port := range l.Ports {
		if out[i] != nil {
			continue
		}
		dev, err := a.m.Device(port.Name)
		if err == nil && dev == nil {
			err = fmt.Errorf("%w: %s", netdev.ErrNoDevice, port.Name)
		}
		if err == nil && dev.Attrs().MTU != linkMTU(l) {
			dev, err = a.setMTU(ctx, l, port)
		}
		if err != nil {
			return made, nil, fmt.Errorf("port %s: %w", port, err)
		}
		out[i] = dev
	}
	return made, out, nil
}

// makePort has the node kind make a port of link l with the link's MTU.
func (a *applier) makePort(ctx context.Context, l *plan.Link, port plan.Port) (netlink.Link, error) {
	a.mu.Lock()
	in := a.running[port.Node]
	a.mu.Unlock()
	n := a.env.Plan.Node(port.Node)
	k, err := kinds.NodeKind(n.Kind)
	if err != nil {
		return nil, err
	}
	dev, err := k.Port(ctx, a.env, in, n, port, l.MTU)
	if err != nil {
		return nil, fmt.Errorf("port %s: %w", port, err)
	}
	a.mu.Lock()
	a.known[port.Name] = true
	a.made[port.Name] = a.listed
	a.mu.Unlock()
	return dev, nil
}

// defaultMTU is the MTU the kernel gives a veth or a tap: a link's MTU when the file gives none.
const defaultMTU = 1500

// linkMTU is the MTU of link l's ports.
func linkMTU(l *plan.Link) int {
	if l.MTU == 0 {
		return defaultMTU
	}
	return l.MTU
}

// setMTU gives an existing port of link l, and the virtual interface inside its node, the
// link's MTU. A node kind that can (kinds.MTUSetter) sets it in place: the node's side first,
// so that a port with the new MTU says both sides have it (an interrupted change is finished
// by the next apply). Another's port is made anew (diff says so: anewOnMTU).
func (a *applier) setMTU(ctx context.Context, l *plan.Link, port plan.Port) (netlink.Link, error) {
	n := a.env.Plan.Node(port.Node)
	k, err := kinds.NodeKind(n.Kind)
	if err != nil {
		return nil, err
	}
	ms, ok := k.(kinds.MTUSetter)
	if !ok {
		return a.makePort(ctx, l, port) // the kind makes it anew (kinds.Node.Port)
	}
	a.mu.Lock()
	in := a.running[port.Node]
	a.mu.Unlock()
	if err := ms.SetMTU(ctx, a.env, in, n, port, linkMTU(l)); err != nil {
		return nil, err
	}
	if err := a.m.SetMTU(port.Name, linkMTU(l)); err != nil {
		return nil, err
	}
	return a.m.Device(port.Name)
}

// join ensures the link's tunnels, shapers, connector, impairments, delays and carrier state.
func (a *applier) join(ctx context.Context, l *plan.Link, ports []netlink.Link) error {
	lk, err := kinds.LinkKind(l.Connector)
	if err != nil {
		return err
	}
	m := kinds.Members{Ports: ports}
	if len(l.Tunnels) > 0 {
		tk, err := kinds.TunnelKind(a.env.Plan.Tunnel)
		if err != nil {
			return err
		}
		tm, err := tk.Ensure(ctx, a.env, l, ports, lk.Direct() && len(ports) == 1)
		if err != nil {
			return err
		}
		m.Tunnels, m.EncapOnPort = tm.Tunnels, tm.EncapOnPort
	}
	// Shape first when adding a cap, so that no frame takes the capped path unshaped.
	if err := setShapers(a.m, append(append([]netlink.Link{}, ports...), m.Tunnels...), l.Rate); err != nil {
		return err
	}
	if err := lk.Join(ctx, a.env, l, m); err != nil {
		return err
	}
	for i, port := range l.Ports {
		a.mu.Lock()
		made := a.made[port.Name]
		a.mu.Unlock()
		// A port made by this apply was configured as it was made; another is configured
		// again only if its addresses changed, or if the last change was interrupted.
		if again, whole := a.reconfigure(port); !made && again {
			if err := a.addresses(ctx, port, whole); err != nil {
				return err
			}
		}
		im := dataplane.Impairment{Loss: port.Impair.Loss, LossCorrelation: port.Impair.LossCorrelation,
			Duplicate: port.Impair.Duplicate, Corrupt: port.Impair.Corrupt}
		// A port just made has no impairment to remove.
		if !made || !im.IsZero() {
			if err := a.m.SetImpairment(a.opt.Dataplane, ports[i].Attrs().Index, im); err != nil {
				return fmt.Errorf("port %s: %w", port, err)
			}
		}
		if err := a.setDelay(ctx, port, ports[i], made); err != nil {
			return fmt.Errorf("port %s: %w", port, err)
		}
		a.mu.Lock()
		a.carriers = append(a.carriers, carrier{port: port, up: !l.Down && !port.Down})
		a.mu.Unlock()
	}
	return nil
}

// carrier is the state a joined port is brought to once every link is joined (setCarriers).
type carrier struct {
	port plan.Port
	up   bool
}

// setCarriers brings the ports that join queued up or down, one after the other. A port is
// brought up with IPv6 disabled (netdev.UpQuiet), and the kernel's disable_ipv6 handler does
// not wait for the RTNL lock: it retries the write, on the CPU, for as long as another holds
// the lock. While links are made in parallel the lock is always held, so the writes are left
// for this moment, when trellis alone takes it.
func (a *applier) setCarriers(ctx context.Context) error {
	return a.portNS.do(func() error { return a.setCarriersHere(ctx) })
}

// setCarriersHere is setCarriers on the calling thread.
func (a *applier) setCarriersHere(ctx context.Context) error {
	for _, c := range a.carriers {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := a.m.SetCarrier(c.port.Name, c.up); err != nil {
			return fmt.Errorf("port %s: %w", c.port, err)
		}
		a.carried.Add(1)
	}
	a.carriers = nil
	return nil
}

// setCarrier brings a port up or down. A veth whose other end is down has no carrier, so the
// virtual interface inside the node sees NO-CARRIER, as with a pulled cable.
func setCarrier(name string, up bool) error {
	if up {
		_, err := netdev.UpQuiet(name)
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0o644); err != nil {
		return err
	}
	return netdev.Down(name)
}

// sameLink tells whether two plans of a link are the same in every respect.
func sameLink(a, b *plan.Link) bool {
	ja, _ := json.Marshal(a) // a plan.Link always marshals
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// reconfigure tells whether the virtual interface of a port that exists must be configured
// again (again): its addresses changed, or nothing is known of what the last apply left (an
// interrupted change; the interface may be half configured, so it is configured whole:
// sysctls and state too). A change of rate, impairment, carrier, MTU or connector leaves the
// addresses alone, and only a whole configuration touches the interface's sysctls and state.
func (a *applier) reconfigure(port plan.Port) (again, whole bool) {
	if a.old == nil {
		return true, true
	}
	op := oldPort(a.old, port)
	if op == nil {
		return true, true
	}
	return !slices.Equal(op.Addresses, port.Addresses), false
}

// oldPort returns the port of p for the same node interface as port, or nil.
func oldPort(p *plan.Plan, port plan.Port) *plan.Port {
	for _, l := range p.Links {
		for i := range l.Ports {
			if l.Ports[i].Node == port.Node && l.Ports[i].Ifname == port.Ifname {
				return &l.Ports[i]
			}
		}
	}
	return nil
}

// placed returns the addresses trellis may have put on a port's virtual interface: those of
// the last applied plan and of every plan the network's record holds (an interrupted or
// rolled back change's target). Only these may be removed from the interface.
func (a *applier) placed(port plan.Port) []string {
	var out []string
	for _, p := range append([]*plan.Plan{a.old}, a.recorded...) {
		if p == nil {
			continue
		}
		if op := oldPort(p, port); op != nil {
			out = append(out, op.Addresses...)
		}
	}
	return out
}

// addresses gives a port's virtual interface the plan's addresses (removing those trellis
// placed that the plan no longer has); whole, also its sysctls and state (kinds.Node.Configure).
func (a *applier) addresses(ctx context.Context, port plan.Port, whole bool) error {
	n := a.env.Plan.Node(port.Node)
	k, err := kinds.NodeKind(n.Kind)
	if err != nil {
		return err
	}
	a.mu.Lock()
	in := a.running[port.Node]
	a.mu.Unlock()
	if err := k.Configure(ctx, a.env, in, n, port, a.placed(port), whole); err != nil {
		return fmt.Errorf("port %s: %w", port, err)
	}
	return nil
}
