package vm

import (
	"context"
	"fmt"
	"os"

	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/vmsock"
	"github.com/vishvananda/netlink"
)

// Port returns the tap of a virtual interface, made at start and held by QEMU, and configures the
// guest's interface. A port the VM did not start with (a link added live) is hot-plugged: a
// new tap and virtio-net device through QEMU's monitor; so is, anew, a port whose MTU is not
// the link's (the link's MTU changed): a virtio NIC's MTU ceiling (host_mtu) is fixed when it
// is plugged, so the VM is no kinds.MTUSetter.
func (Kind) Port(ctx context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node, p plan.Port, mtu int) (netlink.Link, error) {
	dev, err := netdev.ByName(p.Name)
	if err != nil {
		return nil, err
	}
	want := mtu
	if want == 0 {
		want = defaultMTU
	}
	if dev == nil || dev.Attrs().MTU != want {
		// hotplug unplugs the NIC before it deletes its devices: QEMU may end when a
		// device it uses goes first.
		if err := hotplug(ctx, env, n.Name, newPort(p, mtu, knobs(n.Node))); err != nil {
			return nil, fmt.Errorf("port %s for %s: %w", p.Name, p, err)
		}
		if dev, err = netdev.ByName(p.Name); err != nil || dev == nil {
			return nil, fmt.Errorf("port %s for %s: QEMU made no tap (%v)", p.Name, p, err)
		}
		if err := tune(in.PID, knobs(n.Node)); err != nil { // the new NIC's vhost threads
			return nil, err
		}
	}
	if err := configure(ctx, env, n, p, mtu, nil, true); err != nil {
		return nil, err
	}
	return dev, nil
}

// defaultMTU is a tap's or veth's MTU when the link gives none: the kernel's.
const defaultMTU = 1500

// Configure gives the guest's interface the port's addresses and removes those of placed (put
// there by trellis before) that the port no longer has; with whole, it also sets the
// interface's sysctls and brings it up. A VM is no kinds.MTUSetter: its NIC's MTU ceiling
// (virtio-net's host_mtu) is fixed when the NIC is plugged, and a guest without the agent
// learns its MTU only then, so a link's new MTU plugs its NICs anew (Port).
func (Kind) Configure(ctx context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node, p plan.Port, placed []string, whole bool) error {
	return configure(ctx, env, n, p, 0, placed, whole)
}

func configure(ctx context.Context, env *kinds.Env, n *plan.Node, p plan.Port, mtu int, placed []string, whole bool) error {
	if !knobs(n.Node).Agent() { // the user's guest configures its own interfaces
		return nil
	}
	c, err := dial(ctx, env, n.Name)
	if err != nil {
		return err
	}
	defer c.Close()
	iface := &guest.Iface{MAC: p.MAC, Name: p.Ifname, Addresses: p.Addresses, Placed: placed, AddressesOnly: !whole}
	if whole {
		iface.MTU, iface.Sysctl = mtu, n.IfaceSysctls(p.Ifname)
	}
	if _, err = c.Do(ctx, &guest.Request{Op: "configure", Iface: iface}); err != nil {
		return fmt.Errorf("interface %s of %s: %w", p.Ifname, n.Name, err)
	}
	return nil
}

// hotplug adds a port to a running VM. A device left from an earlier port of the same
// interface (its link was removed) is unplugged first. Trellis opens the port's devices and
// gives them to QEMU through its monitor (getfd), as QEMU runs as an unprivileged uid.
func hotplug(ctx context.Context, env *kinds.Env, name string, p vmPort) error {
	m, err := dialQMP(ctx, vmsock.Path(env.Store.ID, env.Plan.NetID, name, vmsock.Monitor))
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.unplug(ctx, deviceID(p.Ifname)); err != nil {
		return err
	}
	if err := wire(&p); err != nil {
		return err
	}
	defer closeAll(p.files, p.vhost)
	give := func(prefix string, files []*os.File) ([]string, error) {
		var names []string
		for i, f := range files {
			names = append(names, fmt.Sprintf("%s-%s%d", p.Name, prefix, i))
			if err := m.getfd(ctx, names[i], f); err != nil {
				return nil, err
			}
		}
		return names, nil
	}
	fds, err := give("q", p.files)
	if err != nil {
		return err
	}
	vhost, err := give("v", p.vhost)
	if err != nil {
		return err
	}
	// A descriptor given to the monitor is found only by a command of that monitor, not by a
	// human-monitor command, which runs in a monitor of its own.
	netdevOpts, deviceOpts := p.qemuDevices(fds, vhost)
	if err := m.netdevAdd(ctx, netdevOpts); err != nil {
		return err
	}
	if err := m.hmp(ctx, "device_add "+deviceOpts); err != nil {
		return err
	}
	return joinBridge(p)
}
