package enginehelper

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
)

// Engines of a VM node (parallel virtual routers, docs/vm.md): the control node is the node's
// VM, and each engine is a VM of its own that the vm kind starts and configures with the
// node's interfaces (the same names, MACs and addresses). The engine's substrate ends are its
// VM's taps. The helper loads and attaches the classifier and dispatcher as for container
// engines, fills the classifier's table of the node's own addresses from the configuration
// (the node's guest is not watched: there is no mirror), and takes an engine whose VM is gone
// (its taps went with QEMU) out of the classifier's table, so that its flows go to the others.

// startVM is start for the engines of a VM node, whose QEMU is c.Control (pidfd open on it).
func startVM(c Config, pidfd int) (*helper, error) {
	h := &helper{c: c, pidfd: pidfd, done: make(chan struct{}), status: StatusPath(c.StateDir, c.NetID, c.Node)}
	for i := range c.Engines {
		f, err := makeVMFE(c, i)
		if err != nil {
			return nil, err
		}
		h.fes = append(h.fes, f)
	}
	var err error
	if h.dp, err = dataplane.LoadEngines(); err != nil {
		return nil, err
	}
	for _, in := range c.Ifaces {
		if err := setLocal(h.dp, in.Addresses); err != nil {
			return nil, err
		}
	}
	if err := setLocal(h.dp, c.Own); err != nil {
		return nil, err
	}
	h.m = &mirror{fes: h.fes, dp: h.dp, names: map[int]string{}, applied: map[string]uint64{},
		resync: make(chan struct{}, 1), guest: &guestSource{socket: MirrorSocket(c.stateID, c.NetID, c.Node)}}
	stop := make(chan struct{})
	sub, err := h.m.watch(stop)
	if err != nil {
		return nil, fmt.Errorf("mirroring %s: %w", c.Node, err)
	}
	if err := h.attach(); err != nil {
		return nil, err
	}
	go h.m.run(h.done, sub, stop)
	if err := os.MkdirAll(filepath.Dir(h.status), state.DirMode); err != nil {
		return nil, err
	}
	return h, h.writeStatus()
}

// setLocal puts addresses (prefixes) into the classifier's table of the node's own.
func setLocal(dp *dataplane.Engines, prefixes []string) error {
	for _, s := range prefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("%w: address %q: %v", ErrConfig, s, err)
		}
		if err := dp.SetLocal(p.Addr().Unmap(), true); err != nil {
			return err
		}
	}
	return nil
}

// makeVMFE is engine i of a VM node: the taps of its VM, which must be there, and the
// mirror's connection to its agent (one that fails now is dialled again by serve).
func makeVMFE(c Config, i int) (*fe, error) {
	f := &fe{index: i, ns: -1, links: map[string]int{}, ports: map[string]int{}, vm: true,
		remote: &remoteFE{guest: MirrorSocket(c.stateID, c.NetID, EngineVM(c.Node, i)), names: map[string]bool{}}}
	f.ops = f.remote
	for _, in := range c.Ifaces {
		f.remote.names[in.Name] = true
		dev, err := netlink.LinkByName(in.FEPorts[i])
		if err != nil {
			return nil, fmt.Errorf("%w: engine VM %d: its tap %s for %s: %v", ErrConfig, i, in.FEPorts[i], in.Name, err)
		}
		f.ports[in.Name] = dev.Attrs().Index
	}
	f.vmUp = true
	f.startWork()
	f.dial()
	return f, nil
}

// tendVMs notes, for each engine VM, whether all its taps are still there and up: a tap goes
// with its QEMU, so an engine VM killed (or crashed) loses its frames at the next configure.
func (h *helper) tendVMs() {
	for _, f := range h.fes {
		if !f.vm {
			continue
		}
		up := true
		for _, idx := range f.ports {
			dev, err := netlink.LinkByIndex(idx)
			if err != nil || dev.Attrs().Flags&1 == 0 || dev.Attrs().OperState == netlink.OperDown {
				up = false
				break
			}
		}
		f.vmUp = up
	}
}
