package substrate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Port namespaces (issue 26, item 2). A bpf_redirect_peer or bpf_redirect looks its target up
// by ifindex in the namespace of the port the frame arrived on (skb_do_redirect ->
// dev_get_by_index_rcu), in a hash of 256 buckets chained through the devices: with every port
// of every network in the root namespace (4096 at 1024 networks) each lookup walks about 16
// devices. With Options.PortNS "auto" or "network", a new network's ports live instead in a
// network namespace of the network's own, PortNSName(netID) under /run/netns, which trellis
// makes before the network's first port and deletes at `down` (which finds it by the network's
// id, also after a killed `up`), unless the network has what does not follow its ports there
// (portNSRefusal): then its ports are in the root namespace, and `up -v` says why (or, with
// "network", `up` refuses it). The default, "root", keeps every network's ports there. Everything
// that works on ports runs on a thread inside it (portsIn.do). A network keeps where its ports
// are for its whole life: the namespace exists or it does not, and only the `up` that creates
// a network makes one (a network of an older trellis, or one changed or rolled back after an
// interruption, keeps its ports in the root namespace).

// PortNSEnv names the environment variable from which the command line takes Options.PortNS.
const PortNSEnv = "TRELLIS_PORT_NETNS"

// netnsDir is where named network namespaces are bound (as `ip netns add` does).
const netnsDir = "/run/netns"

// ErrPortNS wraps failures to make, open or delete a port namespace.
var ErrPortNS = errors.New("port namespace")

// PortNSName names network netID's port namespace ("trp" and the id: trellis never makes
// another namespace of that form).
func PortNSName(netID string) string { return "trp" + netID }

// portNSWanted tells whether new networks get a port namespace (Options.PortNS): want, if it is
// "auto" or "network"; must, if it is "network" (a network that cannot have one is refused rather
// than given the root namespace's ports, as it is with "auto"). Empty is "root", the default:
// a network in a port namespace refuses a live change to what does not follow its ports there
// yet (a delay above all), which a user of the default must be able to make. An unknown value
// is an error naming the setting.
func portNSWanted(opt Options) (want, must bool, err error) {
	switch v := opt.PortNS; v {
	case "auto":
		return true, false, nil
	case "network":
		return true, true, nil
	case "", "root":
		return false, false, nil
	default:
		return false, false, fmt.Errorf("%w: %q (--port-netns, %s): want \"root\" (the default), \"auto\" (a namespace of the network's own where it can) or \"network\"", ErrPortNS, v, PortNSEnv)
	}
}

// OpenPortNS opens network netID's port namespace: ok is false (and no error) if the network
// has none, its ports being in the root namespace.
func OpenPortNS(netID string) (ns netns.NsHandle, ok bool, err error) {
	ns, err = netns.GetFromPath(filepath.Join(netnsDir, PortNSName(netID)))
	if errors.Is(err, unix.ENOENT) {
		return netns.None(), false, nil
	}
	if err != nil {
		return netns.None(), false, fmt.Errorf("%w %s: %w", ErrPortNS, PortNSName(netID), err)
	}
	return ns, true, nil
}

// makePortNS makes network netID's port namespace, bound under /run/netns, with its loopback
// up, and returns a handle to it (the existing one if it is there already).
func makePortNS(netID string) (netns.NsHandle, error) {
	if ns, ok, err := OpenPortNS(netID); ok || err != nil {
		return ns, err
	}
	runtime.LockOSThread()
	origin, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), err
	}
	defer origin.Close()
	ns, err := netns.NewNamed(PortNSName(netID)) // enters it
	if serr := netns.Set(origin); serr != nil {
		// The thread stays locked: the runtime discards it with the goroutine.
		return netns.None(), fmt.Errorf("%w %s: returning to the root namespace: %w", ErrPortNS, PortNSName(netID), serr)
	}
	runtime.UnlockOSThread()
	if err != nil {
		return netns.None(), fmt.Errorf("%w %s: %w", ErrPortNS, PortNSName(netID), err)
	}
	return ns, nil
}

// removePortNS deletes network netID's port namespace if it has one: the kernel deletes the
// ports in it (and their peers, the nodes' interfaces) once nothing holds it.
func removePortNS(netID string) error {
	err := netns.DeleteNamed(PortNSName(netID))
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) { // not mounted, or no file
		if rerr := os.Remove(filepath.Join(netnsDir, PortNSName(netID))); rerr != nil && !os.IsNotExist(rerr) {
			return fmt.Errorf("%w %s: %w", ErrPortNS, PortNSName(netID), rerr)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrPortNS, PortNSName(netID), err)
	}
	return nil
}

// portsIn is where a network's ports are: ns if set, else the root namespace (the zero value).
// unkeep ends the reuse of routing sockets opened inside ns (netdev.Keep), if it was asked.
type portsIn struct {
	set    bool
	ns     netns.NsHandle
	unkeep func()
}

// do runs f where the ports are: on a thread inside the port namespace, or as it is.
func (p portsIn) do(f func() error) error {
	if !p.set {
		return f()
	}
	return netnsutil.Do(p.ns, f)
}

// close releases the handle and the kept sockets.
func (p portsIn) close() {
	if p.unkeep != nil {
		p.unkeep()
	}
	if p.set {
		p.ns.Close()
	}
}

// ErrPortNSUnsupported is returned for a network whose ports live in a port namespace and that
// asks for what does not follow them there yet.
var ErrPortNSUnsupported = errors.New("not supported with ports in a namespace of their own")

// openPorts finds where the network's ports are (portsPlace) and opens or makes its port
// namespace if they are in one.
func (a *applier) openPorts() error {
	want, must, err := portNSWanted(a.opt)
	if err != nil {
		return err
	}
	p := a.env.Plan
	ns, has, err := a.m.OpenPortNS(p.NetID)
	if err != nil {
		return err
	}
	refusal := portNSRefusal(p)
	inNS, err := portsPlace(p, has, want && a.opt.created, must, refusal)
	switch {
	case err != nil || !inNS:
		if has {
			ns.Close()
		}
		if err == nil && want && a.opt.created {
			logline.OrDiscard(a.env.Log).Info("the ports are in the root namespace, not in one of the network's own: "+refusal.Error(), "portns", "root")
		}
		return err
	case !has:
		if ns, err = a.m.MakePortNS(p.NetID); err != nil {
			return err
		}
	}
	// An apply makes a few requests per port there: keep their routing sockets.
	unkeep, err := netdev.Keep(ns)
	if err != nil {
		ns.Close()
		return fmt.Errorf("%w %s: %w", ErrPortNS, PortNSName(p.NetID), err)
	}
	a.portNS = portsIn{set: true, ns: ns, unkeep: unkeep}
	return nil
}

// portsPlace decides whether the ports of the network of plan p are in a port namespace:
// where they are already if the network has one (has), and it must not need what does not
// follow them there (refusal); else in a new one if the apply may make it (mayMake: it creates the
// network and the setting wants one) and nothing refuses it; else in the root namespace, or an
// error if the setting is "network" (must).
func portsPlace(p *plan.Plan, has, mayMake, must bool, refusal error) (bool, error) {
	switch {
	case has && refusal != nil:
		return false, fmt.Errorf("network %s has its ports in a namespace of its own (%s): %w; to have it, take the network down and up again with --port-netns root (or %s=root)",
			p.Network, PortNSName(p.NetID), refusal, PortNSEnv)
	case has:
		return true, nil
	case !mayMake:
		return false, nil
	case refusal != nil && must:
		return false, fmt.Errorf("network %s (--port-netns network, or %s=network): %w; give auto (a namespace of the network's own where it can) or root",
			p.Network, PortNSEnv, refusal)
	}
	return refusal == nil, nil
}

// portNSRefusal names the first part of plan p that cannot work with its ports in a port
// namespace yet: tunnels (their underlay is the root namespace's), delay lines, engines, eBPF
// data planes and nodes of kinds whose ports do not follow (not kinds.Namespaced: a VM's tap is
// made in the root).
func portNSRefusal(p *plan.Plan) error {
	refuse := func(what string) error { return fmt.Errorf("%s: %w", what, ErrPortNSUnsupported) }
	if p.Tunnel != "" {
		return refuse("tunnel " + p.Tunnel + " (its underlay is the root namespace's)")
	}
	for _, n := range p.Nodes {
		switch {
		case !kinds.IsNamespaced(n.Kind):
			return refuse("node " + n.Name + " of kind " + n.Kind)
		case len(n.FEPorts) > 0:
			return refuse("node " + n.Name + "'s engines")
		case n.Dataplane != nil:
			return refuse("node " + n.Name + "'s eBPF data plane")
		}
	}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Impair.Delays() {
				return refuse("link " + l.Name + "'s delay at " + port.String())
			}
		}
	}
	return nil
}

// portsDevs are a network's port devices and where they are: root's, or those of the
// network's port namespace (read there).
type portsDevs struct {
	devs rootDevices
	in   portsIn
}

// portDevices reads the devices of network netID's port namespace if it has one; else the
// ports are root's.
func portDevices(netID string, p *plan.Plan, root rootDevices) (portsDevs, error) {
	ns, ok, err := OpenPortNS(netID)
	if err != nil || !ok {
		return portsDevs{devs: root}, err
	}
	out := portsDevs{in: portsIn{set: true, ns: ns}}
	err = out.in.do(func() (err error) {
		out.devs, err = readRootDevices(shaped(p))
		return err
	})
	if err != nil {
		ns.Close()
		return portsDevs{}, fmt.Errorf("%w %s: %w", ErrPortNS, PortNSName(netID), err)
	}
	return out, nil
}
