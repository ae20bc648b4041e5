// Package setup is the bench's harness: it builds the setups that the bench measures through
// (Trellis paper, figure 6), each a source, a node under test and a sink, in anonymous network
// namespaces, in trellis networks made through the spec, plan and substrate layers as
// `trellis up` makes them, and across simulated machines (named network namespaces running the
// trellis binary). It records every run, so that what a run killed with SIGKILL left behind
// (simulated machines, trellis nodes and devices, processes, its work directory) is found and
// removed by the next run or by Clean, touching nothing else.
package setup

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netns"
)

// Kind is one way of forwarding (Trellis paper, figure 6): a source, a node under test and a
// sink. The bench builds it, measures through it, and tears it down, leaving nothing.
type Kind struct {
	Name string
	Desc string
	// build makes the setup with nets parallel virtual networks (each a source, a node under
	// test and a sink).
	build func(h *Harness, nets int) (*Rig, error)
}

// kinds are measured in this order; ratios are taken to "native" of the same run.
var kinds = []Kind{
	{Name: Direct, Desc: "no node under test: the source's veth ends in the sink (the generator's ceiling)", build: buildDirect},
	{Name: "native", Desc: "a plain network namespace forwards in the kernel, veths to source and sink, no trellis (figure 6a)", build: buildNative},
	{Name: "shortbridge", Desc: "trellis: source, node under test and sink are nodes of one network; links use the shortbridge (eBPF, figure 6f without tunnels)", build: trellisSetup(spec.Shortbridge, false)},
	{Name: "veth", Desc: "trellis: as shortbridge, with links that have nothing to enforce (connector veth here; connector auto gives them the same): one veth pair between two nodes, no port (as native, containerlab and Mininet)", build: trellisSetup("veth", false)},
	{Name: "veth-impair", Desc: "trellis: as veth, with a loss of 0.001% on both links (below the zero-loss tolerance): on Linux 6.6 and later a default link with an impairment stays one veth pair, the impairment done by tcx programs on the nodes' interfaces; below 6.6 it gets the shortbridge's ports", build: settingsSetup("veth-impair", "loss: 0.001%", false)},
	{Name: "rate", Desc: "trellis: default links with a rate of 10 Gbit/s, above what the bench offers: a link with a rate gets the shortbridge's ports, the rate enforced on them", build: settingsSetup("rate", "rate: 10gbit", false)},
	{Name: "shortbridge-tcx", Desc: "as shortbridge, with the ports' programs on their tcx ingress (TRELLIS_PORT_HOOK=tcx) instead of as tc filters under clsact qdiscs", build: tcxSetup},
	{Name: "shortbridge-xdp", Desc: "prototype: as shortbridge, with XDP on the ports redirecting through a device map to the other port, and a passing XDP program on the nodes' interfaces (frames cross as XDP frames, converted from and to skbs)", build: xdpSetup},
	{Name: "bridge", Desc: "trellis: as shortbridge, with a Linux bridge per link (figure 6d without tunnels)", build: trellisSetup(spec.Bridge, false)},
	{Name: "lan", Desc: "trellis: as shortbridge, with the eBPF LAN connector (learning table, flooding by cloning) per link", build: trellisSetup("lan", false)},
	{Name: "userspace", Desc: "trellis node under test whose relay process forwards UDP between two sockets (the PL-VINI baseline, figure 6b)", build: trellisSetup(spec.Shortbridge, true)},
	{Name: "ebpf-l3", Desc: "trellis: as shortbridge, with the node under test forwarding with the program of examples/ebpf/l3 (dataplane: {program: l3.c}, an LPM routes table filled at run time) instead of its kernel (issue 28)", build: ebpfSetup},
	{Name: "vm-tap", Desc: "trellis: as shortbridge, with the node under test a VM (kind: vm, QEMU) whose interfaces are virtio-net on taps (the KVM paper's tap interconnect); functional only without KVM", build: vmSetup("tap")},
	{Name: "vm-macvtap", Desc: "trellis: as vm-tap, with each virtio-net interface on a macvtap (passthru) on the far end of a veth port (the KVM paper's macvtap interconnect); functional only without KVM", build: vmSetup("macvtap")},
	{Name: "vm-pvr", Desc: "trellis: as vm-tap, with the node under test a VM with two engine VMs behind its taps (engines: 2, the KVM paper's parallel virtual routers through the PdP classifier and dispatcher), and at least 8 flows so that flow dispatch spreads them; functional only without KVM", build: vmPVRSetup},
	{Name: "vm-bridge", Desc: "trellis: as vm-tap, with each virtio-net interface on a tap in a Linux bridge with the far end of a veth port (the KVM paper's bridge interconnect); functional only without KVM", build: vmSetup("bridge")},
	// Setups across two machines, simulated on this one (machines.go).
	{Name: "egre-shortbridge", Desc: "trellis over two machines: source and sink on one, the node under test on the other; its links are EGRE tunnels joined to its ports by the shortbridge (figure 6f)", build: tunnelSetup("egre-shortbridge", spec.EGRE, spec.Shortbridge)},
	{Name: "egre-bridge", Desc: "trellis over two machines, as egre-shortbridge, with a Linux bridge joining each EGRE tunnel to the node's port (figure 6d)", build: tunnelSetup("egre-bridge", spec.EGRE, spec.Bridge)},
	{Name: "egre-shortbridge-fib", Desc: "as egre-shortbridge, with the encapsulation looking the underlay route up for every frame (the path before the per-tunnel template of outer headers), for comparison", build: tunnelSetup("egre-shortbridge-fib", spec.EGRE, spec.Shortbridge, dataplane.EncapRouteEnv+"=per-frame")},
	// Setups across three machines, shaped like the paper's router under test (router.go).
	{Name: "egre3-shortbridge", Desc: "trellis over three machines joined by a switch: source, node under test and sink each on a machine of its own, EGRE tunnels joined to the node's ports by the shortbridge; the node's machine does a router's work only (figure 6f as the paper measured it)", build: routerSetup("egre3-shortbridge", spec.EGRE, spec.Shortbridge)},
	{Name: "egre3-bridge", Desc: "as egre3-shortbridge, with a Linux bridge joining each EGRE tunnel to the node's port (figure 6d as the paper measured it)", build: routerSetup("egre3-bridge", spec.EGRE, spec.Bridge)},
	{Name: "vxlan", Desc: "trellis over two machines, as egre-shortbridge, with the kernel's VXLAN devices as tunnels (shortbridge connector)", build: tunnelSetup("vxlan", spec.VXLAN, spec.Shortbridge)},
}

// Direct is the setup without a node under test: the generator's ceiling, and the sink's cost.
const Direct = "direct"

// Find returns the setup named name, or nil.
func Find(name string) *Kind {
	for i := range kinds {
		if kinds[i].Name == name {
			return &kinds[i]
		}
	}
	return nil
}

// Names lists every setup, in the order they are measured.
func Names() []string {
	var out []string
	for _, k := range kinds {
		out = append(out, k.Name)
	}
	return out
}

// Check returns an error naming every unknown setup of names, with the known ones.
func Check(names []string) error {
	var bad []string
	for _, n := range names {
		if Find(n) == nil {
			bad = append(bad, fmt.Sprintf("%q", n))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w %s; known: %s", ErrUnknownSetup, strings.Join(bad, ", "), strings.Join(Names(), ", "))
	}
	return nil
}

// Addresses of every setup: the source is 10.1.0.1 on the first link, the node under test
// 10.1.0.2 there and 10.2.0.1 on the second link, the sink 10.2.0.2. Virtual networks of
// trellis may all reuse them.
var (
	SrcIP  = net.IPv4(10, 1, 0, 1)
	NutIn  = net.IPv4(10, 1, 0, 2)
	NutOut = net.IPv4(10, 2, 0, 1)
	SinkIP = net.IPv4(10, 2, 0, 2)
)

// UDP ports of the frames.
const (
	SrcPort   = 10000 // flow i comes from UDP port SrcPort+i
	SinkPort  = 9000
	relayPort = 9000
)

// buildDirect joins a source namespace straight to a sink namespace.
func buildDirect(h *Harness, nets int) (*Rig, error) {
	g := &Rig{Name: Direct, Nets: 1, genCPU: h.GenCPU}
	src, err := h.namespace(g)
	if err != nil {
		return g, err
	}
	sink, err := h.namespace(g)
	if err != nil {
		return g, err
	}
	if err := vethBetween(src, "eth1", sink, "eth1"); err != nil {
		return g, err
	}
	if err := upWithAddr(src, "eth1", "10.2.0.1/24"); err != nil {
		return g, err
	}
	if err := upWithAddr(sink, "eth1", "10.2.0.2/24"); err != nil {
		return g, err
	}
	if err := h.steer(sink, "eth1"); err != nil {
		return g, err
	}
	return g, g.finish(src, "eth1", sink, "eth1", sink, "eth1", SinkIP)
}

// buildNative makes the node under test a plain namespace forwarding in the kernel, nets times
// side by side.
func buildNative(h *Harness, nets int) (*Rig, error) {
	g := h.NewRig("native")
	for i := 0; i < max(nets, 1); i++ {
		if err := h.AddNativeNet(g); err != nil {
			return g, err
		}
	}
	return g, nil
}

// AddNativeNet adds one native network to rig g: a source, a plain namespace forwarding in the
// kernel and a sink, joined by veths, without trellis (and without a device in the root
// namespace).
func (h *Harness) AddNativeNet(g *Rig) error {
	var ns [3]netns.NsHandle
	for i := range ns {
		var err error
		if ns[i], err = h.namespace(g); err != nil {
			return err
		}
	}
	src, nut, sink := ns[0], ns[1], ns[2]
	if err := vethBetween(src, "eth1", nut, "eth1"); err != nil {
		return err
	}
	if err := vethBetween(nut, "eth2", sink, "eth1"); err != nil {
		return err
	}
	if err := netnsutil.Sysctl(nut, map[string]string{"net/ipv4/ip_forward": "1"}); err != nil {
		return err
	}
	for _, s := range []netns.NsHandle{src, nut, sink} {
		if err := netnsutil.Sysctl(s, map[string]string{"net/ipv6/conf/all/disable_ipv6": "1", "net/ipv6/conf/default/disable_ipv6": "1"}); err != nil {
			return err
		}
	}
	for _, a := range []struct {
		ns         netns.NsHandle
		name, cidr string
	}{{src, "eth1", "10.1.0.1/24"}, {nut, "eth1", "10.1.0.2/24"}, {nut, "eth2", "10.2.0.1/24"}, {sink, "eth1", "10.2.0.2/24"}} {
		if err := upWithAddr(a.ns, a.name, a.cidr); err != nil {
			return err
		}
	}
	if err := h.steer(nut, "eth1"); err != nil {
		return err
	}
	if err := g.finish(src, "eth1", nut, "eth1", sink, "eth1", SinkIP); err != nil {
		return err
	}
	g.Nets++
	return nil
}

// ErrUnknownSetup is returned for a setup name that is not one of Names.
var ErrUnknownSetup = errors.New("no setup named")
