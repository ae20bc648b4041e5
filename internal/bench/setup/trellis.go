package setup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	_ "github.com/trellisnet/trellis/internal/kinds/all" // the kinds the files may name
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/vishvananda/netns"
)

// trellisSetup returns the builder of a setup whose source, node under test and sink are nodes
// of one trellis network per virtual network, built through the same spec, plan and substrate
// code as `trellis up`. With relay, the node under test forwards in user space.
func trellisSetup(connector string, relay bool) func(h *Harness, nets int) (*Rig, error) {
	name := connector
	if relay {
		name = "userspace"
	}
	return settingsSetup(name, "connector: "+connector, relay)
}

// settingsSetup is a setup named name whose two links have the settings given as one line of
// YAML each (a connector, a rate, an impairment).
func settingsSetup(name, settings string, relay bool) func(h *Harness, nets int) (*Rig, error) {
	return func(h *Harness, nets int) (*Rig, error) {
		g := h.NewRig(name)
		g.Nets = nets
		for i := 0; i < nets; i++ {
			if err := h.addTrellisNet(g, fmt.Sprintf("bench-%s-%d", name, i), settings, relay, nil); err != nil {
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
    %[2]s
  - endpoints: [nut:eth2, sink:eth1]
    %[2]s
`

// benchFile is the bench topology of network name, each link with the settings given as one
// line of YAML ("connector: shortbridge").
func benchFile(name, settings string) string {
	return fmt.Sprintf(benchTopology, name, settings)
}

// AddTrellisNet brings up one bench network (source, node under test, sink) with trellis, and
// adds it to rig g: its source to the generator, its sink to the sink counter.
func (h *Harness) AddTrellisNet(g *Rig, name, connector string, relay bool) error {
	return h.addTrellisNet(g, name, "connector: "+connector, relay, nil)
}

// addTrellisNet is AddTrellisNet with the links' settings given as a line of YAML, and a change
// made to the network once it is up (nil: none).
func (h *Harness) addTrellisNet(g *Rig, name, settings string, relay bool, change func(*BenchNet) error) error {
	b, err := h.upBenchFile(g, name, benchFile(name, settings))
	if err != nil {
		return err
	}
	if change != nil {
		if err := change(b); err != nil {
			return fmt.Errorf("network %s: %w", name, err)
		}
	}
	if err := h.steerFirst(b); err != nil {
		return err
	}
	dst := SinkIP
	if relay {
		dst = NutIn
		if err := h.startRelay(g, b.PIDs["nut"]); err != nil {
			return err
		}
	}
	return g.finish(b.NS["src"], "eth1", b.NS["nut"], "eth1", b.NS["sink"], "eth1", dst)
}

// steerFirst steers the receive processing of the first device that receives from the source
// to the forwarding CPU, as for native: the source link's port, in the root namespace or in the
// network's port namespace (substrate.PortNSEnv), or on a link without ports (veth) the node's
// interface.
func (h *Harness) steerFirst(b *BenchNet) error {
	first := b.plan.Links[0].Ports[0].Name
	pns, ok, err := substrate.OpenPortNS(b.plan.NetID)
	if err != nil {
		return err
	}
	if ok {
		defer pns.Close()
		return h.steer(pns, first)
	}
	if dev, err := netdev.ByName(first); err != nil {
		return err
	} else if dev == nil {
		return h.steer(b.NS["nut"], "eth1")
	}
	return h.steer(h.rootNS, first)
}

// BenchNet is a bench network that trellis has brought up.
type BenchNet struct {
	plan *plan.Plan
	PIDs map[string]int            // node init processes, by node name
	NS   map[string]netns.NsHandle // node network namespaces, by node name
}

// UpBenchNet brings up the three nodes and two links of a bench network through the spec, plan
// and substrate layers, as `trellis up` does; the rig takes it down at Close.
func (h *Harness) UpBenchNet(g *Rig, name, connector string) (*BenchNet, error) {
	return h.upBenchFile(g, name, benchFile(name, "connector: "+connector))
}

// upBenchFile brings up a bench network from its topology file's text.
func (h *Harness) upBenchFile(g *Rig, name, topology string) (*BenchNet, error) {
	st, err := h.Store()
	if err != nil {
		return nil, err
	}
	n, err := spec.Parse(name+".yaml", []byte(topology))
	if err != nil {
		return nil, err
	}
	g.onClose(func() error { return DownQuiet(st, name) })
	if _, err := substrate.Up(context.Background(), st, n, "", "(trellis-bench)", h.Substrate); err != nil {
		return nil, fmt.Errorf("trellis up %s: %w", name, err)
	}
	rec, err := st.Load(name)
	if err != nil || rec == nil {
		return nil, fmt.Errorf("network %s: no record after up (%v)", name, err)
	}
	b := &BenchNet{plan: rec.Plan, PIDs: rec.Nodes, NS: map[string]netns.NsHandle{}}
	for _, pn := range rec.Plan.Nodes {
		nd := pn.Name
		nh, err := netns.GetFromPid(rec.Nodes[nd]) // a VM's QEMU runs in the root namespace
		if err != nil {
			return nil, fmt.Errorf("node %s of %s: %w", nd, name, err)
		}
		b.NS[nd] = nh
		g.onClose(func() error { return nh.Close() })
	}
	return b, nil
}

// DownQuiet removes a bench network; one that is not there is no error.
func DownQuiet(st *state.Store, name string) error {
	if err := substrate.Down(st, name); err != nil && !errors.Is(err, substrate.ErrNoNetwork) {
		return fmt.Errorf("trellis down %s: %w", name, err)
	}
	return nil
}

// startRelay starts the user-space relay in node pid, pinned to the forwarding CPU: this
// program (handed to nsenter open, as its fd 3: the node's mounts may hide its path) as
// `trellis-bench __relay`, entered into the node's namespaces but its user namespace with
// nsenter. It keeps the bench's capabilities (it is the bench's own code). It dies with the noderuntime.
func (h *Harness) startRelay(g *Rig, pid int) error {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("nsenter (util-linux) runs the relay in its node: %w", err)
	}
	argv := []string{"--target", strconv.Itoa(pid), "--mount", "--uts", "--ipc", "--net", "--pid", "--wd=/", "--",
		"/proc/self/fd/3", measure.RelayCmd,
		"--listen", net.JoinHostPort(NutIn.String(), strconv.Itoa(relayPort)),
		"--to", net.JoinHostPort(SinkIP.String(), strconv.Itoa(SinkPort)),
		"--cpu", strconv.Itoa(h.FwdCPU)}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	exe, err := os.Open(self)
	if err != nil {
		return err
	}
	defer exe.Close() // nsenter has its copy once started
	cmd := exec.Command(nsenter, argv...)
	cmd.Env = noderuntime.Env
	cmd.ExtraFiles = []*os.File{exe}
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
	g.Relay = func() int { return childOf(nsenterPID) }
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
