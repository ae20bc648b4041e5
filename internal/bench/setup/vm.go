package setup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	nodekinds "github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/kinds/vm"
	"github.com/trellisnet/trellis/internal/state"
)

// vmSetup returns the builder of the setup whose node under test is a VM (kind: vm): the
// shortbridge setup with the node under test's interfaces virtio-net devices that meet their
// ports through the given interconnect (tap, macvtap or bridge: the KVM paper's Figure 13).
// Without KVM it is functional only: the guest is emulated.
func vmSetup(interconnect string) func(h *Harness, nets int) (*Rig, error) {
	return func(h *Harness, nets int) (*Rig, error) {
		name := "vm-" + interconnect
		g := h.NewRig(name)
		g.Nets = nets
		for i := 0; i < nets; i++ {
			if _, err := h.addVMNet(g, fmt.Sprintf("bench-%s-%d", name, i), "{interconnect: "+interconnect+"}"); err != nil {
				return g, err
			}
		}
		return g, nil
	}
}

// VMRig builds a vm-tap setup of one network whose VM has the settings vm (the YAML of the
// node's `vm:` mapping, e.g. "{reserve: 50%}"; "" for none), with the given frames, and returns
// it with the pid of the VM's QEMU.
func (h *Harness) VMRig(vm string, size, flows int) (*Rig, int, error) {
	g := h.NewRig("vm-tap")
	g.Nets = 1
	pid, err := h.addVMNet(g, "bench-vm-knobs", vm)
	if err == nil {
		err = g.SetFrames(size, flows)
	}
	if err != nil {
		return nil, 0, errors.Join(err, g.Close())
	}
	return g, pid, nil
}

// vmPVRSetup builds the setup whose node under test is a VM node with two engine VMs
// (parallel virtual routers, docs/vm.md), each network's source sending at least pvrFlows
// flows, so that the flow dispatch spreads them over both.
func vmPVRSetup(h *Harness, nets int) (*Rig, error) {
	g := h.NewRig("vm-pvr")
	g.Nets, g.minFlows = nets, pvrFlows
	for i := 0; i < nets; i++ {
		if _, err := h.addVMNodeNet(g, fmt.Sprintf("bench-vm-pvr-%d", i), "    engines: 2\n"); err != nil {
			return g, err
		}
	}
	return g, nil
}

// pvrFlows is the least number of flows of the vm-pvr setup.
const pvrFlows = 8

// addVMNet adds a vm-tap network to g and returns its QEMU's pid.
func (h *Harness) addVMNet(g *Rig, name, vm string) (int, error) {
	extra := ""
	if vm != "" {
		extra = "    vm: " + vm + "\n"
	}
	return h.addVMNodeNet(g, name, extra)
}

// addVMNodeNet adds a network to g whose node under test is a VM with the extra lines of YAML
// (its settings), and returns its QEMU's pid.
func (h *Harness) addVMNodeNet(g *Rig, name, extra string) (int, error) {
	nut := "  nut:\n    kind: vm\n" + extra
	topology := strings.Replace(benchFile(name, "connector: shortbridge"), "  nut:\n", nut, 1)
	b, err := h.upBenchFile(g, name, topology)
	if err != nil {
		return 0, err
	}
	return b.PIDs["nut"], h.wireVM(g, b)
}

// wireVM wires a vm-tap network's source and sink.
func (h *Harness) wireVM(g *Rig, b *BenchNet) error {
	if err := h.steer(h.rootNS, b.plan.Links[0].Ports[0].Name); err != nil {
		return err
	}
	kl, err := openLink(b.NS["sink"], "eth1")
	if err != nil {
		return err
	}
	defer kl.Close()
	sinkMAC, err := kl.mac()
	if err != nil {
		return err
	}
	// The guest needs the sink's MAC (the sink answers no ARP); its agent sets it.
	st, err := h.Store()
	if err != nil {
		return err
	}
	neigh := []string{"ip", "neigh", "replace", SinkIP.String(), "lladdr", sinkMAC.String(), "dev", "eth2", "nud", "permanent"}
	if err := runIn(st, b, "nut", neigh...); err != nil {
		return err
	}
	for i := range b.plan.Node("nut").Engines { // and its engine VMs', which forward
		if err := runIn(st, b, vm.EngineName("nut", i), neigh...); err != nil {
			return err
		}
	}
	nutMAC, err := net.ParseMAC(b.plan.Links[0].Ports[1].MAC)
	if err != nil {
		return err
	}
	return g.wire(b.NS["src"], "eth1", nutMAC, b.NS["sink"], "eth1", SinkIP)
}

// runIn runs a command in a node whose kind runs commands itself (a VM's guest agent).
// An engine VM (vm.EngineName) is reached through its node's kind.
func runIn(st *state.Store, b *BenchNet, node string, argv ...string) error {
	name := node
	if n, ok := vm.EngineOf(node); ok {
		node = n
	}
	nd := b.plan.Node(node)
	k, err := nodekinds.NodeKind(nd.Kind)
	if err != nil {
		return err
	}
	r, ok := k.(nodekinds.Runner)
	if !ok {
		return fmt.Errorf("node %s (%s) does not run commands through trellis", node, nd.Kind)
	}
	env := &nodekinds.Env{Store: st, Plan: b.plan}
	running, err := k.Running(env)
	if err != nil {
		return err
	}
	in := running[node]
	in.Name = name
	var out strings.Builder
	code, err := r.Run(context.Background(), env, in, argv, nil, &out, &out)
	if err == nil && code != 0 {
		err = fmt.Errorf("%v in %s exited with %d: %s", argv, node, code, out.String())
	}
	return err
}

// vmBootTopology is one VM node running BIRD, for the boot time.
const vmBootTopology = `name: bench-vm-boot
nodes:
  v:
    kind: vm
    files:
      - path: /etc/bird/bird.conf
        content: |
          router id 10.255.0.1;
          protocol device {}
    exec:
      - bird -c /etc/bird/bird.conf -s /run/bird/bird.ctl
`

// VMBoot brings up a network of one VM node running BIRD and returns how long it took from
// the start of up until BIRD answered in the guest; the network is removed again.
func (h *Harness) VMBoot(ctx context.Context) (time.Duration, error) {
	g := h.NewRig("vm-boot")
	defer g.Close()
	t0 := time.Now()
	b, err := h.upBenchFile(g, "bench-vm-boot", vmBootTopology)
	if err != nil {
		return 0, err
	}
	st, err := h.Store()
	if err != nil {
		return 0, err
	}
	for ctx.Err() == nil {
		if runIn(st, b, "v", "birdc", "-s", "/run/bird/bird.ctl", "show", "status") == nil {
			return time.Since(t0), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, ctx.Err()
}
