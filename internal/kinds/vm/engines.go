package vm

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/vmsock"
	"github.com/vishvananda/netlink"
)

// Parallel virtual routers (the KVM paper's PVR; docs/vm.md): a VM node with `engines: N` is
// its own VM, the control node, which answers for the node's addresses, plus N engine VMs of
// the same image, each with a copy of each of the node's interfaces (the same MAC, MTU and
// addresses) on a tap of its own, named as the engines' substrate ends (plan.Node.FEPorts).
// The engines helper (internal/enginehelper) puts the classifier on the node's taps and the
// dispatcher on the engine VMs' taps, as it does for container engines' veths: transit frames
// are spread over the engine VMs, and what they send leaves through the node's ports, with
// the node's MAC. Engine VMs share the node's control group and knobs, and go with the node.

// feSep separates a node's name from its engine's in the engine VMs' guest names and
// sockets; node names cannot hold it.
const feSep = "@fe"

// feName is the name engine i of node runs under: NODE@feI (engines.EngineVM too).
func feName(node string, i int) string { return fmt.Sprintf("%s%s%d", node, feSep, i) }

// EngineName is the name engine VM i of node runs under: trellis finds its agent by it (a
// kinds.Instance of that name is the engine VM's, for Run).
func EngineName(node string, i int) string { return feName(node, i) }

// EngineOf tells whether name is an engine VM's (EngineName), and of which node.
func EngineOf(name string) (node string, ok bool) { return isFE(name) }

// isFE tells whether a name found by findQEMU is an engine VM's, and of which node.
func isFE(name string) (node string, ok bool) {
	node, _, ok = strings.Cut(name, feSep)
	return node, ok
}

// fePorts are the ports of engine i of node n: the node's, on the engine's taps.
func fePorts(p *plan.Plan, n *plan.Node, i int) []vmPort {
	ps := ports(p, n)
	for j := range ps {
		ps[j].Name = n.FEPorts[i][ps[j].Ifname]
	}
	return ps
}

// launchEngines starts the QEMU of each engine VM of node n, as runAs and in the node's group
// g, and returns their pids; the guests boot while the node's own is set up.
func launchEngines(ctx context.Context, env *kinds.Env, n *plan.Node, img image.Image, runAs string, g *cgroup.Group) ([]int, error) {
	var pids []int
	for i := range n.Engines {
		pid, err := launchEngine(ctx, env, n, i, img, runAs, g)
		if err != nil {
			return pids, fmt.Errorf("engine VM %d of %s: %w", i, n.Name, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

func launchEngine(ctx context.Context, env *kinds.Env, n *plan.Node, i int, img image.Image, runAs string, g *cgroup.Group) (int, error) {
	id, netID := env.Store.ID, env.Plan.NetID
	logDir := env.Store.LogDir(env.Plan.Network)
	name := feName(n.Name, i)
	ps := fePorts(env.Plan, n, i)
	var files []*os.File
	defer func() { closeAll(files) }() // QEMU has its own copies
	// Each port a tap, made anew (one left by an engine VM killed with its node goes).
	for j := range ps {
		if err := wire(&ps[j]); err != nil {
			return 0, err
		}
		files = append(append(files, ps[j].files...), ps[j].vhost...)
	}
	if err := vmsock.Make(id, netID, name); err != nil {
		return 0, err
	}
	sock := func(what string) string { return vmsock.Path(id, netID, name, what) }
	argv := args(img, marker(id, netID, name, n.Digest), runAs, sock, filepath.Join(logDir, name+".console"), n, ps)
	return launch(ctx, argv, filepath.Join(logDir, name+".qemu"), sock(vmsock.Monitor), files, g)
}

// setupEngines waits for each engine VM's agent and configures it as the node: the node's
// sysctls with forwarding on and redirects off (plan.FESysctls), and each interface with
// the node's name, MAC, MTU and addresses; it brings the engine's taps up and tunes its QEMU.
func setupEngines(ctx context.Context, env *kinds.Env, n *plan.Node, pids []int) error {
	for i, pid := range pids {
		if err := setupEngine(ctx, env, n, i); err != nil {
			return fmt.Errorf("engine VM %d of %s: %w (its console: %s)", i, n.Name, err,
				filepath.Join(env.Store.LogDir(env.Plan.Network), feName(n.Name, i)+".console"))
		}
		if err := tune(pid, knobs(n.Node)); err != nil {
			return err
		}
	}
	return nil
}

func setupEngine(ctx context.Context, env *kinds.Env, n *plan.Node, i int) error {
	c, err := dial(ctx, env, feName(n.Name, i))
	if err != nil {
		return err
	}
	defer c.Close()
	sysctl := maps.Clone(plan.FESysctls)
	maps.Copy(sysctl, n.NodeSysctls(env.Plan.Endpoints(n.Name)))
	if _, err := c.Do(ctx, &guest.Request{Op: "setup", Hostname: n.Name, Sysctl: sysctl}); err != nil {
		return err
	}
	for _, p := range fePorts(env.Plan, n, i) {
		dev, err := netdev.UpQuiet(p.Name)
		if err != nil {
			return err
		}
		if p.MTU > 0 && dev.Attrs().MTU != p.MTU {
			if err := netlink.LinkSetMTU(dev, p.MTU); err != nil {
				return fmt.Errorf("tap %s: %w", p.Name, err)
			}
		}
		ifSysctl := map[string]string{"net/ipv4/conf/" + p.Ifname + "/send_redirects": "0"} // as a container FE's
		maps.Copy(ifSysctl, n.IfaceSysctls(p.Ifname))
		_, err = c.Do(ctx, &guest.Request{Op: "configure", Iface: &guest.Iface{
			MAC: p.MAC, Name: p.Ifname, MTU: p.MTU, Addresses: p.Addresses, Sysctl: ifSysctl,
		}})
		if err != nil {
			return fmt.Errorf("interface %s: %w", p.Ifname, err)
		}
	}
	return nil
}

// engineVMs returns, by node, the pids of the engine VMs findQEMU found: pids[node][i], 0 for
// one not running.
func engineVMs(found map[string][]kinds.Instance, p *plan.Plan) map[string][]int {
	out := map[string][]int{}
	for name, all := range found {
		node, ok := isFE(name)
		n := p.Node(node)
		if !ok || n == nil {
			continue
		}
		if out[node] == nil {
			out[node] = make([]int, len(n.Engines))
		}
		for i := range n.Engines {
			if name == feName(node, i) {
				out[node][i] = all[0].PID
			}
		}
	}
	return out
}

// enginesMissing tells whether any of a node's want engine VMs has no pid in pids.
func enginesMissing(pids []int, want int) bool {
	for i := range want {
		if i >= len(pids) || pids[i] == 0 {
			return true
		}
	}
	return false
}

// engineNote says in inspect which QEMU runs each engine VM of node name, or "".
func engineNote(env *kinds.Env, name string) string {
	n := env.Plan.Node(name)
	if n == nil || len(n.Engines) == 0 {
		return ""
	}
	found, err := findQEMU(env.Store.ID, env.Plan.NetID)
	if err != nil {
		return "engine VMs: " + err.Error()
	}
	pids := engineVMs(found, env.Plan)[name]
	var each []string
	for i := range n.Engines {
		if i < len(pids) && pids[i] != 0 {
			each = append(each, fmt.Sprintf("fe%d QEMU pid %d", i, pids[i]))
		} else {
			each = append(each, fmt.Sprintf("fe%d not running", i))
		}
	}
	return "engine VMs: " + strings.Join(each, ", ")
}

// orphanEngines returns, for each node whose engine VMs run without its own QEMU (it was
// killed), an instance of the node held by one of them and running in part, so that down and
// up stop them with their node.
func orphanEngines(found map[string][]kinds.Instance) map[string]kinds.Instance {
	out := map[string]kinds.Instance{}
	for name, all := range found {
		node, ok := isFE(name)
		if _, alive := found[node]; !ok || alive {
			continue
		}
		if in, seen := out[node]; !seen || all[0].PID < in.PID {
			out[node] = kinds.Instance{Kind: Name, Name: node, PID: all[0].PID, Digest: kinds.PartGone}
		}
	}
	return out
}
