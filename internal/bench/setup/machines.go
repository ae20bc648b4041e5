package setup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The tunnel setups spread one trellis network over two machines, simulated on this one as
// scripts/sim-machines.sh does: each machine is a named network namespace with an underlay
// interface eth0. Machine A holds the source and the sink, machine B the node under test, so
// that both of the node's links cross between machines in a tunnel.
//
// The underlay is one veth pair from A's eth0 to B's eth0, a cable between two machines: a
// bridge in a third namespace (the switch of sim-machines.sh) would add a bridge hop per frame
// and direction that no machine pays for in the paper's setup, where a hardware switch joins the
// machines. Its MTU is 1600, as an underlay is often made larger than 1500 so that tunnelled
// links keep an MTU of 1500: the topology gives both links mtu 1500, as in the other setups, and
// every frame size of the sizes part fits.
//
// Trellis runs "on" each machine as a user would run it there (docs/multi-host.md): the trellis
// binary, `ip netns exec MACHINE trellis --state-dir DIR up --host NAME FILE`, with a state
// directory per machine under the run's work directory. That is the code path of `trellis up`
// (spec.Parse, plan.Make for that host, substrate.Up) inside the machine's network namespace.
// It cannot run inside the bench's own process: the substrate talks netlink and writes
// /proc/sys/net in the namespace of the calling thread, and it works from many goroutines at
// once (one per node and per link), which Go schedules on threads of the root namespace; one
// thread locked into a namespace does not carry its goroutines along.

// underlayMTU is the MTU of the simulated machines' underlay.
const underlayMTU = 1600

// simMachine is one simulated machine.
type simMachine struct {
	host  string         // its name in the topology's hosts
	netns string         // the named network namespace, under /run/netns
	ns    netns.NsHandle // a handle on it
	addr  string         // underlay IPv4 address
	state string         // trellis state directory of this machine
	work  string         // the run's work directory
	bin   string         // the trellis binary
	env   []string       // added to the environment of trellis commands
}

// machinePair makes machines A and B joined by their underlay, for rig g, which removes them at
// Close. Their names hold the run's id (Run), so that two benches (or the integration tests'
// machines) never collide, and Clean finds them after a crash. env is added to the environment
// of every trellis command run on them.
func (h *Harness) machinePair(g *Rig, env []string) (a, b *simMachine, err error) {
	ms, err := h.newMachines(g, env, "ma", "mb")
	if err != nil {
		return nil, nil, err
	}
	if err := vethBetween(ms[0].ns, "eth0", ms[1].ns, "eth0"); err != nil {
		return nil, nil, err
	}
	for _, m := range ms {
		if err := m.underlayUp(); err != nil {
			return nil, nil, err
		}
	}
	return ms[0], ms[1], nil
}

// newMachines makes one named network namespace per host, numbered as the run's next group of
// machines, without their underlay; rig g removes them at Close.
func (h *Harness) newMachines(g *Rig, env []string, hosts ...string) ([]*simMachine, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("the tunnel setups run trellis in simulated machines with `ip netns exec` (iproute2): %w", err)
	}
	h.machines++
	var ms []*simMachine
	for i, host := range hosts {
		m := &simMachine{host: host, netns: h.run.machineNetns(h.machines, host), addr: fmt.Sprintf("198.18.%d.%d", 100+h.machines%100, i+1),
			state: h.run.machineState(h.machines, host), work: h.Work, bin: h.Trellis, env: env}
		if out, err := exec.Command("ip", "netns", "add", m.netns).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ip netns add %s: %v: %s", m.netns, err, strings.TrimSpace(string(out)))
		}
		g.onClose(func() error {
			if out, err := exec.Command("ip", "netns", "del", m.netns).CombinedOutput(); err != nil {
				return fmt.Errorf("ip netns del %s: %v: %s", m.netns, err, strings.TrimSpace(string(out)))
			}
			return nil
		})
		var err error
		if m.ns, err = netns.GetFromName(m.netns); err != nil {
			return nil, fmt.Errorf("machine %s: %w", m.netns, err)
		}
		g.onClose(func() error { return m.ns.Close() })
		ms = append(ms, m)
	}
	return ms, nil
}

// underlayUp gives machine m's eth0 (already made) the underlay MTU and address, and turns IPv6
// off on the machine.
func (m *simMachine) underlayUp() error {
	if err := netnsutil.Sysctl(m.ns, map[string]string{"net/ipv6/conf/all/disable_ipv6": "1", "net/ipv6/conf/default/disable_ipv6": "1"}); err != nil {
		return err
	}
	h, err := netlink.NewHandleAt(m.ns)
	if err != nil {
		return err
	}
	lk, err := h.LinkByName("eth0")
	if err == nil {
		err = h.LinkSetMTU(lk, underlayMTU)
	}
	h.Close()
	if err != nil {
		return fmt.Errorf("underlay of %s: %w", m.netns, err)
	}
	if err := upWithAddr(m.ns, "eth0", m.addr+"/24"); err != nil {
		return fmt.Errorf("underlay of %s: %w", m.netns, err)
	}
	return nil
}

// trellis runs the trellis binary on machine m with its state directory.
func (m *simMachine) trellis(args ...string) error {
	self := m.bin
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return err
		}
	}
	argv := append([]string{"netns", "exec", m.netns, self, "--state-dir", m.state}, args...)
	cmd := exec.Command("ip", argv...)
	if len(m.env) > 0 {
		cmd.Env = append(os.Environ(), m.env...)
	}
	// Node processes started by `up` keep no descriptor of ours: output goes to a file, so that
	// nothing waits for a pipe that a node holds open.
	out, err := os.CreateTemp(m.work, "trellis-out-")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	// Ctrl-C of the bench lets it finish; if the bench is killed, it goes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		err = fmt.Errorf("%w (killed after 2 minutes)", <-done)
	}
	if err != nil {
		text, _ := os.ReadFile(out.Name())
		return fmt.Errorf("on %s: trellis %s: %v: %s", m.host, strings.Join(args, " "), err, strings.TrimSpace(string(text)))
	}
	return nil
}

// spreadNet is a bench network spread over simulated machines.
type spreadNet struct {
	plans map[string]*plan.Plan     // the plan each machine built, by host
	pids  map[string]int            // node init processes, by node name
	ns    map[string]netns.NsHandle // node network namespaces, by node name
}

// upSpread brings network name, from topology, up on machines ms in turn (the machine of the
// node under test first), and registers its removal with the rig: `trellis down` on each
// machine before the machines themselves are removed.
func (h *Harness) upSpread(g *Rig, name string, topology []byte, ms ...*simMachine) (*spreadNet, error) {
	file := filepath.Join(h.Work, fmt.Sprintf("%s-%d.yaml", name, h.machines))
	if err := os.WriteFile(file, topology, 0o644); err != nil {
		return nil, err
	}
	s := &spreadNet{plans: map[string]*plan.Plan{}, pids: map[string]int{}, ns: map[string]netns.NsHandle{}}
	for _, m := range ms {
		g.onClose(func() error { return m.down(name) })
		if err := m.trellis("up", "--host", m.host, file); err != nil {
			return nil, err
		}
		st, err := state.Open(m.state)
		if err != nil {
			return nil, err
		}
		rec, err := st.Load(name)
		if err != nil || rec == nil {
			return nil, fmt.Errorf("network %s on %s: no record after up (%v)", name, m.host, err)
		}
		s.plans[m.host] = rec.Plan
		for nd, pid := range rec.Nodes {
			s.pids[nd] = pid
			nh, err := netns.GetFromPid(pid)
			if err != nil {
				return nil, fmt.Errorf("node %s of %s: %w", nd, name, err)
			}
			s.ns[nd] = nh
			g.onClose(func() error { return nh.Close() })
		}
	}
	return s, nil
}

// down takes network name down on machine m; a network that is not up there is no error.
func (m *simMachine) down(name string) error {
	st, err := state.Open(m.state)
	if err != nil {
		return err
	}
	if rec, err := st.Load(name); err == nil && rec == nil {
		return nil
	}
	err = m.trellis("down", name)
	if err != nil {
		m.killNodes(st, name)
	}
	return err
}

// killNodes kills the recorded nodes of network name, whose down failed: the machine goes
// next, with every device of the network; node processes would outlive it.
func (m *simMachine) killNodes(st *state.Store, name string) {
	if rec, err := st.Load(name); err == nil && rec != nil {
		for _, pid := range rec.Nodes {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
			}
		}
	}
}

// hostsTopology is the bench network over two machines: the source and the sink on machine A,
// the node under test on machine B, both links crossing between them in tunnel.
const hostsTopology = `name: %s
tunnel: %s
hosts:
  ma: {address: %s, mtu: %d}
  mb: {address: %s, mtu: %d}
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
    host: ma
    addresses: {eth1: [10.2.0.2/24]}
    sysctl: {net.ipv4.ip_forward: 0, net.ipv6.conf.all.forwarding: 0, net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
links:
  - name: in
    endpoints: [src:eth1, nut:eth1]
    connector: %s
    mtu: 1500
  - name: out
    endpoints: [nut:eth2, sink:eth1]
    connector: %s
    mtu: 1500
`

func spreadTopology(name, tunnel, connector, addrA, addrB string) []byte {
	return fmt.Appendf(nil, hostsTopology, name, tunnel, addrA, underlayMTU, addrB, underlayMTU, connector, connector)
}

// tunnelSetup returns the builder of a setup whose node under test is on another machine than
// its source and sink, joined to them by tunnel links with the given connector; env is added
// to the environment of trellis on the machines.
func tunnelSetup(name, tunnel, connector string, env ...string) func(h *Harness, nets int) (*Rig, error) {
	return func(h *Harness, nets int) (*Rig, error) {
		g := &Rig{Name: name, Nets: 1, Tunnel: true, genCPU: h.GenCPU}
		if nets != 1 {
			return g, errors.New("the tunnel setups have one network")
		}
		a, b, err := h.machinePair(g, env)
		if err != nil {
			return g, err
		}
		netName := "bench-" + name
		s, err := h.upSpread(g, netName, spreadTopology(netName, tunnel, connector, a.addr, b.addr), b, a)
		if err != nil {
			return g, err
		}
		g.Split = func(split bool) error { return h.steerTunnel(a, b, s, split) }
		if err := g.Split(false); err != nil {
			return g, err
		}
		return g, g.finish(s.ns["src"], "eth1", s.ns["nut"], "eth1", s.ns["sink"], "eth1", SinkIP)
	}
}

// steerTunnel steers the receive processing of a tunnel setup, in one of two ways.
//
// Whole path (split false; the forwarding and sizes parts): the source's port on machine A (the
// first device to receive from the generator) to the forwarding CPU, and nothing else, as in
// the single-machine setups: everything after the generator follows on that CPU (machine A's
// end of the first tunnel, machine B's decapsulation, connectors, forwarding and encapsulation,
// machine A's end of the second tunnel, and the sink's drop), so the peak is what one CPU
// forwards along the whole path. The tester never limits it.
//
// Split (split true; the CPU part): machine B's eth0 to the forwarding CPU, so that CPU does
// machine B's work and nothing else (the node under test's machine, with its ends of both
// tunnels); machine A's eth0 and the source's port to the tester CPU, which does machine A's
// work (the source's and the sink's ends of the tunnels, and the sink). The CPU part measures
// both CPUs: the node's machine's share and the whole path's.
func (h *Harness) steerTunnel(a, b *simMachine, s *spreadNet, split bool) error {
	if h.FwdCPU < 0 {
		return nil
	}
	none := netnsutil.CPUMask(-1)
	srcPort, bEth0, aEth0 := netnsutil.CPUMask(h.FwdCPU), none, none
	if split {
		tester := netnsutil.CPUMask(h.TesterCPU())
		srcPort, bEth0, aEth0 = tester, netnsutil.CPUMask(h.FwdCPU), tester
	}
	if err := netnsutil.SetRPS(b.ns, "eth0", bEth0); err != nil {
		return err
	}
	if err := netnsutil.SetRPS(a.ns, "eth0", aEth0); err != nil {
		return err
	}
	for _, l := range s.plans[a.host].Links {
		for _, p := range l.Ports {
			if p.Node == "src" {
				if err := netnsutil.SetRPS(a.ns, p.Name, srcPort); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
