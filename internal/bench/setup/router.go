package setup

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The router setups (egre3-*) are shaped like the paper's router under test (section 5, figure
// 6): the source, the node under test and the sink each on a machine of its own, simulated as
// the two-machine setups are, the three machines' underlays plugged into a switch (a fourth
// namespace with a Linux bridge, the hardware switch of the paper's testbed). Every frame is
// encapsulated on machine A, crosses the switch, is decapsulated, forwarded and encapsulated
// again on machine B, crosses the switch again and is decapsulated on machine C: machine B does
// exactly a router's work, and no work of the tester's.
//
// Steering: receive processing of machine B's underlay goes to the forwarding CPU, and that of
// every other device that receives frames (the source's port on A, the switch's ports, C's
// underlay) to the tester CPU. Machine B's work is then the only NET_RX work on the forwarding
// CPU (a frame that B transmits is queued for the switch port's CPU), so the CPU part's
// softirq time on that CPU per frame is the router machine's CPU per frame. The same steering
// is used for the peak, which the tester CPU (generator, machines A and C and the switch) may
// limit before the router's does.

// routerTopology is the bench network over machines A (source), B (node under test) and C
// (sink).
const routerTopology = `name: %[1]s
tunnel: %[2]s
hosts:
  ma: {address: %[3]s, mtu: %[6]d}
  mb: {address: %[4]s, mtu: %[6]d}
  mc: {address: %[5]s, mtu: %[6]d}
nodes:
  src:
    host: ma
    addresses: {eth1: [10.1.0.1/24]}
    sysctl: {net.ipv4.ip_forward: 0, net.ipv6.conf.all.forwarding: 0, net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
  nut:
    host: mb
    addresses: {eth1: [10.1.0.2/24], eth2: [10.2.0.1/24]}
    sysctl: {net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
  sink:
    host: mc
    addresses: {eth1: [10.2.0.2/24]}
    sysctl: {net.ipv4.ip_forward: 0, net.ipv6.conf.all.forwarding: 0, net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
links:
  - name: in
    endpoints: [src:eth1, nut:eth1]
    connector: %[7]s
    mtu: 1500
  - name: out
    endpoints: [nut:eth2, sink:eth1]
    connector: %[7]s
    mtu: 1500
`

// switchBridge is the switch's bridge device; its ports are named "p-" and the host.
const switchBridge = "br0"

// routerSetup returns the builder of a router setup with the given tunnel and connector.
func routerSetup(name, tunnel, connector string) func(h *Harness, nets int) (*Rig, error) {
	return func(h *Harness, nets int) (*Rig, error) {
		g := &Rig{Name: name, Nets: 1, Tunnel: true, genCPU: h.GenCPU}
		if nets != 1 {
			return g, errors.New("the router setups have one network")
		}
		ms, err := h.newMachines(g, nil, "ma", "mb", "mc", "sw")
		if err != nil {
			return g, err
		}
		a, b, c, sw := ms[0], ms[1], ms[2], ms[3]
		if err := plugIntoSwitch(sw.ns, a, b, c); err != nil {
			return g, err
		}
		netName := "bench-" + name
		topo := fmt.Appendf(nil, routerTopology, netName, tunnel, a.addr, b.addr, c.addr, underlayMTU, connector)
		s, err := h.upSpread(g, netName, topo, b, a, c)
		if err != nil {
			return g, err
		}
		steer := func(bool) error { return h.steerRouter(a, b, c, sw, s) }
		g.Split = steer
		if err := steer(true); err != nil {
			return g, err
		}
		return g, g.finish(s.ns["src"], "eth1", s.ns["nut"], "eth1", s.ns["sink"], "eth1", SinkIP)
	}
}

// plugIntoSwitch joins each machine's eth0 to a port of a bridge in namespace sw, and brings
// the machines' underlays up. The switch's namespace has bridge netfilter off, where the kernel
// has it: a hardware switch does not run the IP firewall on what it switches.
func plugIntoSwitch(sw netns.NsHandle, ms ...*simMachine) error {
	err := netnsutil.Sysctl(sw, map[string]string{"net/bridge/bridge-nf-call-iptables": "0",
		"net/bridge/bridge-nf-call-ip6tables": "0", "net/bridge/bridge-nf-call-arptables": "0"})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("switch: %w", err)
	}
	h, err := netlink.NewHandleAt(sw)
	if err != nil {
		return err
	}
	defer h.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: switchBridge, MTU: underlayMTU}}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("switch bridge: %w", err)
	}
	for _, m := range ms {
		port := "p-" + m.host
		if err := vethBetween(m.ns, "eth0", sw, port); err != nil {
			return err
		}
		lk, err := h.LinkByName(port)
		if err == nil {
			err = h.LinkSetMTU(lk, underlayMTU)
		}
		if err == nil {
			err = h.LinkSetMaster(lk, br)
		}
		if err == nil {
			err = h.LinkSetUp(lk)
		}
		if err != nil {
			return fmt.Errorf("switch port %s: %w", port, err)
		}
		if err := m.underlayUp(); err != nil {
			return err
		}
	}
	if err := h.LinkSetUp(br); err != nil {
		return fmt.Errorf("switch bridge up: %w", err)
	}
	return nil
}

// steerRouter steers machine B's underlay to the forwarding CPU and every other receiving
// device of the setup to the tester CPU (see the comment at the top of this file).
func (h *Harness) steerRouter(a, b, c, sw *simMachine, s *spreadNet) error {
	if h.FwdCPU < 0 {
		return nil
	}
	type rps struct {
		ns     netns.NsHandle
		ifname string
		mask   string
	}
	tester, fwd := netnsutil.CPUMask(h.TesterCPU()), netnsutil.CPUMask(h.FwdCPU)
	steer := []rps{{b.ns, "eth0", fwd}, {a.ns, "eth0", tester}, {c.ns, "eth0", tester}}
	for _, m := range []*simMachine{a, b, c} {
		steer = append(steer, rps{sw.ns, "p-" + m.host, tester})
	}
	for _, l := range s.plans[a.host].Links {
		for _, p := range l.Ports {
			if p.Node == "src" {
				steer = append(steer, rps{a.ns, p.Name, tester})
			}
		}
	}
	for _, st := range steer {
		if err := netnsutil.SetRPS(st.ns, st.ifname, st.mask); err != nil {
			return err
		}
	}
	return nil
}
