package bench

import (
	"context"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/node"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/vishvananda/netns"
)

// A setup is one way of forwarding (Trellis paper, figure 6): a source, a node under test and a
// sink. The bench builds it, measures through it, and tears it down, leaving nothing.
type setupKind struct {
	Name string
	Desc string
	// build makes the setup with nets parallel virtual networks (each a source, a node under
	// test and a sink); nil while the setup is not implemented yet.
	build func(r *runner, nets int) (*rig, error)
	// Pending says why build is nil.
	Pending string
}

// Setups are measured in this order; ratios are taken to "native" of the same run.
var setupKinds = []setupKind{
	{Name: "direct", Desc: "no node under test: the source's veth ends in the sink (the generator's ceiling)", build: buildDirect},
	{Name: "native", Desc: "a plain network namespace forwards in the kernel, veths to source and sink, no trellis (figure 6a)", build: buildNative},
	{Name: "shortbridge", Desc: "trellis: source, node under test and sink are nodes of one network; links use the shortbridge (eBPF, figure 6f without tunnels)", build: trellisSetup(spec.Shortbridge, false)},
	{Name: "bridge", Desc: "trellis: as shortbridge, with a Linux bridge per link (figure 6d without tunnels)", build: trellisSetup(spec.Bridge, false)},
	{Name: "userspace", Desc: "trellis node under test whose relay process forwards UDP between two sockets (the PL-VINI baseline, figure 6b)", build: trellisSetup(spec.Shortbridge, true)},
	// Setups across two machines, simulated on this one (machines.go).
	{Name: "egre-shortbridge", Desc: "trellis over two machines: source and sink on one, the node under test on the other; its links are EGRE tunnels joined to its ports by the shortbridge (figure 6f)", build: tunnelSetup("egre-shortbridge", spec.EGRE, spec.Shortbridge)},
	{Name: "egre-bridge", Desc: "trellis over two machines, as egre-shortbridge, with a Linux bridge joining each EGRE tunnel to the node's port (figure 6d)", build: tunnelSetup("egre-bridge", spec.EGRE, spec.Bridge)},
	{Name: "vxlan", Desc: "trellis over two machines, as egre-shortbridge, with the kernel's VXLAN devices as tunnels (shortbridge connector)", build: tunnelSetup("vxlan", spec.VXLAN, spec.Shortbridge)},
}

func findSetup(name string) *setupKind {
	for i := range setupKinds {
		if setupKinds[i].Name == name {
			return &setupKinds[i]
		}
	}
	return nil
}

// Addresses of every setup: the source is 10.1.0.1 on the first link, the node under test
// 10.1.0.2 there and 10.2.0.1 on the second link, the sink 10.2.0.2. Virtual networks of
// trellis may all reuse them.
var (
	srcIP   = net.IPv4(10, 1, 0, 1)
	nutInIP = net.IPv4(10, 1, 0, 2)
	nutOut  = net.IPv4(10, 2, 0, 1)
	sinkIP  = net.IPv4(10, 2, 0, 2)
)

const (
	srcPort   = 10000 // flow i comes from UDP port srcPort+i
	sinkPort  = 9000
	relayPort = 9000
)

// source is where a virtual network's traffic starts.
type source struct {
	ns     netns.NsHandle
	ifname string
	addrs  flowAddrs
	link   *nsLink
}

// rig is a built setup: its sources, its sink counter, and how to take it down.
type rig struct {
	name    string
	nets    int
	sources []*source
	sink    *sinkCounter
	gen     *generator
	closers []func() error
	after   []chan struct{} // closed when processes of the setup have been reaped
	// tunnel: the source and sink are on another simulated machine than the node under test;
	// split steers that machine's work away from the forwarding CPU, or back (steerTunnel).
	tunnel bool
	split  func(split bool) error
	relay  func() int // the pid of the user-space relay (setup userspace), 0 if it is gone
	tag    uint16     // the current trial's number, carried in its frames
}

// onClose registers f to run at Close, in reverse order of registration.
func (g *rig) onClose(f func() error) { g.closers = append(g.closers, f) }

// Close tears the setup down and reports every failure.
func (g *rig) Close() error {
	var errs []error
	if g.gen != nil {
		g.gen.Close()
	}
	for _, s := range g.sources {
		if s.link != nil {
			s.link.Close()
		}
	}
	for i := len(g.closers) - 1; i >= 0; i-- {
		if err := g.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	if g.sink != nil {
		g.sink.Close()
	}
	for _, c := range g.after {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("a process of the setup did not end"))
		}
	}
	return errors.Join(errs...)
}

// setFrames (re)makes the generator's frames: size bytes, spread over flows UDP flows per
// virtual network. The transmit rings are opened on first use.
func (g *rig) setFrames(r *runner, size, flows int) error {
	if g.gen == nil {
		g.gen = &generator{cpu: r.genCPU}
		for _, s := range g.sources {
			p, err := openTxPort(s.ns, s.ifname, nil)
			if err != nil {
				return err
			}
			g.gen.ports = append(g.gen.ports, p)
		}
	}
	for i, s := range g.sources {
		frames, err := udpFrames(s.addrs, size, flows)
		if err != nil {
			return err
		}
		g.gen.ports[i].frames = frames
		g.gen.ports[i].flow = 0
	}
	return nil
}

// buildDirect joins a source namespace straight to a sink namespace.
func buildDirect(r *runner, nets int) (*rig, error) {
	g := &rig{name: "direct", nets: 1}
	src, err := r.namespace(g)
	if err != nil {
		return g, err
	}
	sink, err := r.namespace(g)
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
	if err := r.steer(sink, "eth1"); err != nil {
		return g, err
	}
	return g, g.finish(r, src, "eth1", sink, "eth1", sink, "eth1", sinkIP)
}

// buildNative makes the node under test a plain namespace forwarding in the kernel.
func buildNative(r *runner, nets int) (*rig, error) {
	g := &rig{name: "native", nets: 1}
	var ns [3]netns.NsHandle
	for i := range ns {
		var err error
		if ns[i], err = r.namespace(g); err != nil {
			return g, err
		}
	}
	src, nut, sink := ns[0], ns[1], ns[2]
	if err := vethBetween(src, "eth1", nut, "eth1"); err != nil {
		return g, err
	}
	if err := vethBetween(nut, "eth2", sink, "eth1"); err != nil {
		return g, err
	}
	if err := sysctlIn(nut, map[string]string{"net/ipv4/ip_forward": "1"}); err != nil {
		return g, err
	}
	for _, s := range []netns.NsHandle{src, nut, sink} {
		if err := sysctlIn(s, map[string]string{"net/ipv6/conf/all/disable_ipv6": "1", "net/ipv6/conf/default/disable_ipv6": "1"}); err != nil {
			return g, err
		}
	}
	for _, a := range []struct {
		ns         netns.NsHandle
		name, cidr string
	}{{src, "eth1", "10.1.0.1/24"}, {nut, "eth1", "10.1.0.2/24"}, {nut, "eth2", "10.2.0.1/24"}, {sink, "eth1", "10.2.0.2/24"}} {
		if err := upWithAddr(a.ns, a.name, a.cidr); err != nil {
			return g, err
		}
	}
	if err := r.steer(nut, "eth1"); err != nil {
		return g, err
	}
	return g, g.finish(r, src, "eth1", nut, "eth1", sink, "eth1", sinkIP)
}

// finish wires the generator and the sink of a network: the node under test (or the sink, for
// direct) nut:nutIf receives from src:srcIf, the node knows the sink's MAC, and the sink drops
// and counts. dst is the destination address of the frames.
func (g *rig) finish(r *runner, src netns.NsHandle, srcIf string, nut netns.NsHandle, nutIf string, sink netns.NsHandle, sinkIf string, dst net.IP) error {
	sl, err := openLink(src, srcIf)
	if err != nil {
		return err
	}
	s := &source{ns: src, ifname: srcIf, link: sl}
	g.sources = append(g.sources, s)
	nl, err := openLink(nut, nutIf)
	if err != nil {
		return err
	}
	defer nl.Close()
	kl, err := openLink(sink, sinkIf)
	if err != nil {
		return err
	}
	defer kl.Close()
	srcMAC, err := sl.mac()
	if err != nil {
		return err
	}
	nutMAC, err := nl.mac()
	if err != nil {
		return err
	}
	sinkMAC, err := kl.mac()
	if err != nil {
		return err
	}
	s.addrs = flowAddrs{SrcMAC: srcMAC, DstMAC: nutMAC, SrcIP: srcIP, DstIP: dst, SrcPort: srcPort, DstPort: sinkPort}
	if nut != sink { // the node under test needs the sink's MAC: the sink answers no ARP
		out, err := openLink(nut, "eth2")
		if err != nil {
			return err
		}
		defer out.Close()
		if err := out.neigh(sinkIP, sinkMAC); err != nil {
			return fmt.Errorf("neighbour entry for the sink: %w", err)
		}
	}
	if g.sink == nil {
		if g.sink, err = newSinkCounter(); err != nil {
			return err
		}
	}
	return g.sink.attach(sink, sinkIf)
}

// trellisSetup returns the builder of a setup whose source, node under test and sink are nodes
// of one trellis network per virtual network, built through the same spec, plan and substrate
// code as `trellis up`. With relay, the node under test forwards in user space.
func trellisSetup(connector string, relay bool) func(r *runner, nets int) (*rig, error) {
	return func(r *runner, nets int) (*rig, error) {
		name := connector
		if relay {
			name = "userspace"
		}
		g := &rig{name: name, nets: nets}
		for i := 0; i < nets; i++ {
			netName := fmt.Sprintf("bench-%s-%d", name, i)
			if err := r.trellisNet(g, netName, connector, relay); err != nil {
				return g, err
			}
		}
		return g, nil
	}
}

const benchTopology = `name: %s
nodes:
  src:
    addresses: {eth1: [10.1.0.1/24]}
    sysctl: {net.ipv4.ip_forward: 0, net.ipv6.conf.all.forwarding: 0, net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
  nut:
    addresses: {eth1: [10.1.0.2/24], eth2: [10.2.0.1/24]}
    sysctl: {net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
  sink:
    addresses: {eth1: [10.2.0.2/24]}
    sysctl: {net.ipv4.ip_forward: 0, net.ipv6.conf.all.forwarding: 0, net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
links:
  - endpoints: [src:eth1, nut:eth1]
    connector: %s
  - endpoints: [nut:eth2, sink:eth1]
    connector: %s
`

// trellisNet brings up one bench network with trellis and wires its generator and sink.
func (r *runner) trellisNet(g *rig, name, connector string, relay bool) error {
	b, err := r.upBenchNet(g, name, connector)
	if err != nil {
		return err
	}
	// The first device that receives from the source is the source link's port in the root
	// namespace: steer its receive processing to the forwarding CPU, as for native.
	if err := r.steer(r.rootNS, b.plan.Links[0].Ports[0].Name); err != nil {
		return err
	}
	dst := sinkIP
	if relay {
		dst = nutInIP
		if err := r.startRelay(g, b.pids["nut"]); err != nil {
			return err
		}
	}
	return g.finish(r, b.ns["src"], "eth1", b.ns["nut"], "eth1", b.ns["sink"], "eth1", dst)
}

// benchNet is a bench network that trellis has brought up.
type benchNet struct {
	plan *plan.Plan
	pids map[string]int            // node init processes, by node name
	ns   map[string]netns.NsHandle // node network namespaces, by node name
}

// upBenchNet brings up the three nodes and two links of a bench network through the spec, plan
// and substrate layers, as `trellis up` does; the rig takes it down at Close.
func (r *runner) upBenchNet(g *rig, name, connector string) (*benchNet, error) {
	st, err := r.store()
	if err != nil {
		return nil, err
	}
	n, err := spec.Parse(name+".yaml", fmt.Appendf(nil, benchTopology, name, connector, connector))
	if err != nil {
		return nil, err
	}
	g.onClose(func() error { return downQuiet(st, name) })
	if _, err := substrate.Up(context.Background(), st, n, "", "(trellis bench)", io.Discard); err != nil {
		return nil, fmt.Errorf("trellis up %s: %w", name, err)
	}
	rec, err := st.Load(name)
	if err != nil || rec == nil {
		return nil, fmt.Errorf("network %s: no record after up (%v)", name, err)
	}
	b := &benchNet{plan: rec.Plan, pids: rec.Nodes, ns: map[string]netns.NsHandle{}}
	for _, nd := range []string{"src", "nut", "sink"} {
		h, err := netns.GetFromPid(rec.Nodes[nd])
		if err != nil {
			return nil, fmt.Errorf("node %s of %s: %w", nd, name, err)
		}
		b.ns[nd] = h
		g.onClose(func() error { return h.Close() })
	}
	return b, nil
}

// downQuiet removes a bench network.
func downQuiet(st *state.Store, name string) error {
	if err := substrate.Down(st, name); err != nil && !strings.Contains(err.Error(), "no network named") {
		return fmt.Errorf("trellis down %s: %w", name, err)
	}
	return nil
}

// startRelay starts the user-space relay in node pid, pinned to the forwarding CPU: the
// trellis binary (the node's /proc/1/exe) as `trellis bench __relay`, entered into all the
// node's namespaces with nsenter as `trellis exec` does. It keeps the bench's capabilities (it is
// the bench's own code; a node's capability set forbids it to execute /proc/1/exe). It dies
// with the node.
func (r *runner) startRelay(g *rig, pid int) error {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("nsenter (util-linux) runs the relay in its node: %w", err)
	}
	argv := []string{"--target", strconv.Itoa(pid), "--mount", "--uts", "--ipc", "--net", "--pid", "--wd=/", "--",
		"/proc/1/exe", "bench", RelayCmd,
		"--listen", net.JoinHostPort(nutInIP.String(), strconv.Itoa(relayPort)),
		"--to", net.JoinHostPort(sinkIP.String(), strconv.Itoa(sinkPort)),
		"--cpu", strconv.Itoa(r.fwdCPU)}
	cmd := exec.Command(nsenter, argv...)
	cmd.Env = node.Env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the relay: %w", err)
	}
	done := make(chan struct{})
	nsenterPID := cmd.Process.Pid
	g.relay = func() int { return childOf(nsenterPID) }
	// Ending the node ends the relay; then nsenter, which waited for it, is reaped.
	g.onClose(func() error { cmd.Process.Kill(); return nil })
	g.after = append(g.after, done)
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(done)
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			return fmt.Errorf("the relay did not start: %q", line)
		}
	case <-time.After(10 * time.Second):
		return errors.New("the relay did not start within 10s")
	}
	return nil
}

// childOf returns a child of process pid (nsenter's: the relay, which it forked to enter the
// node's PID namespace), 0 if it has none.
func childOf(pid int) int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(data[bytes.LastIndexByte(data, ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			return child
		}
	}
	return 0
}
