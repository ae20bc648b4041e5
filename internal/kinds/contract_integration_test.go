//go:build integration

package kinds_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/kinds"
	_ "github.com/trellisnet/trellis/internal/kinds/all"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The contract every kind keeps, checked for every registered kind: making twice is making
// once, removing twice is removing once, and removing what a crash left half made removes what
// exists. Each test runs in a network namespace of its own, so the host is never touched.

// TestMain lets the test binary be a node's init and run commands in nodes, as trellis does.
func TestMain(m *testing.M) {
	switch {
	case os.Getpid() == 1 && os.Args[0] == guest.InitPath: // the agent of the vm kind's guests
		guest.Main(nil) // no VM node with engines here
	case len(os.Args) > 1 && os.Args[1] == noderuntime.JoinArg:
		noderuntime.JoinMain(os.Args[2:])
	}
	os.Exit(m.Run())
}

// fixture is a network namespace standing in for a machine, with a state directory and a plan
// of two nodes a and b on link "l" (ports p0 and p1), and a tunnel from this machine
// (198.18.0.1, on device "underlay") to another (198.18.0.2).
type fixture struct {
	env  *kinds.Env
	link *plan.Link
}

func inMachine(t *testing.T, f func(fx *fixture)) {
	t.Helper()
	ns, err := netnsutil.New()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Delete("contract") // its uid range and copy of /etc
	err = netnsutil.Do(ns, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "underlay"}, PeerName: "wire"}); err != nil {
			return err
		}
		u, err := netdev.UpQuiet("underlay")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(u, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(198, 18, 0, 1), Mask: net.CIDRMask(24, 32)}}); err != nil {
			return err
		}
		netID := plan.NetID(st.ID, "contract")
		p := &plan.Plan{Network: "contract", NetID: netID, Host: "m1", Local: netip.MustParseAddr("198.18.0.1")}
		l := &plan.Link{Name: "l", MTU: 1400, Device: plan.DeviceName(netID, 'b', 9)}
		for i, n := range []string{"a", "b"} {
			p.Nodes = append(p.Nodes, &plan.Node{Node: &spec.Node{Name: n, Kind: spec.DefaultNodeKind,
				Addresses: map[string][]string{"eth1": {"10.0.0." + string(rune('1'+i)) + "/24"}}}, Digest: "d"})
			l.Ports = append(l.Ports, plan.Port{Node: n, Ifname: "eth1", Name: plan.DeviceName(netID, 'p', i),
				MAC: plan.MAC("contract", n, "eth1"), Addresses: []string{"10.0.0." + string(rune('1'+i)) + "/24"}})
		}
		p.Links = []*plan.Link{l}
		f(&fixture{env: &kinds.Env{Store: st, Plan: p, Log: logline.Logger(os.Stderr, os.Stderr)}, link: l})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNodeKindContract(t *testing.T) {
	names, _, _ := kinds.Names()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			k, _ := kinds.NodeKind(name)
			if p, ok := k.(kinds.Preparer); ok { // in the host's namespace: it may download
				prepareTwice(t, p, &kinds.Env{Log: logline.Logger(os.Stderr, os.Stderr)})
			}
			inMachine(t, func(fx *fixture) {
				ctx := context.Background()
				n := fx.env.Plan.Nodes[0]
				in, err := k.Start(ctx, fx.env, n)
				if err != nil {
					t.Fatal(err)
				}
				defer k.Stop(ctx, fx.env, in)
				running, err := k.Running(fx.env)
				if err != nil || running[n.Name].PID != in.PID || running[n.Name].Digest != n.Digest {
					t.Fatalf("Running = %v, %v; want %s with pid %d and digest %s", running, err, n.Name, in.PID, n.Digest)
				}
				port := fx.link.Ports[0]
				d1, err := k.Port(ctx, fx.env, in, n, port, fx.link.MTU)
				if err != nil {
					t.Fatal(err)
				}
				d2, err := k.Port(ctx, fx.env, in, n, port, fx.link.MTU)
				if err != nil || d2.Attrs().Index != d1.Attrs().Index {
					t.Errorf("Port twice: %v, index %d then %d; want the same port", err, d1.Attrs().Index, d2.Attrs().Index)
				}
				// An address the node's software made stays; the one trellis placed goes.
				nodeRun(t, k, fx.env, in, "ip", "addr", "add", "10.0.0.50/24", "dev", "eth1")
				placed := port.Addresses
				for range 2 {
					port.Addresses = []string{"10.0.0.9/24", "fd00::9/64"}
					if err := k.Configure(ctx, fx.env, in, n, port, placed, false); err != nil {
						t.Fatal(err)
					}
				}
				out, _ := nodeRun(t, k, fx.env, in, "ip", "-o", "addr", "show", "eth1")
				if strings.Contains(out, "10.0.0.1/") || !strings.Contains(out, "10.0.0.9/24") || strings.Count(out, "fd00::9/64") != 1 || !strings.Contains(out, "10.0.0.50/24") {
					t.Errorf("Configure twice: eth1 has\n%s\nwant 10.0.0.9/24, fd00::9/64 and the node's 10.0.0.50/24 (and link-local), not 10.0.0.1", out)
				}
				checkAddressesOnly(t, k, fx.env, in, n, port)
				checkRunning(t, k, fx.env, in, n, port)
				checkStopping(t, k, fx.env, in)
				if running, _ := k.Running(fx.env); len(running) != 0 {
					t.Errorf("after Stop, Running = %v", running)
				}
				// The kernel frees a dead node's namespace, and its ports, a little later.
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					dev, _ := netdev.ByName(port.Name)
					if dev == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("port %s outlived its node by 10 s", port.Name)
						break
					}
				}
			})
		})
	}
}

// checkAddressesOnly checks that Configure, not whole, changes an interface's addresses alone:
// the state and the sysctl that the node's software set stay; and that an MTUSetter sets the
// MTU on the same interface, its addresses kept.
func checkAddressesOnly(t *testing.T, k kinds.Node, env *kinds.Env, in kinds.Instance, n *plan.Node, port plan.Port) {
	t.Helper()
	ctx := context.Background()
	dad := "/proc/sys/net/ipv6/conf/eth1/accept_dad"
	for _, c := range [][]string{{"sh", "-c", "echo 1 > " + dad}, {"ip", "link", "set", "eth1", "down"}} {
		if out, err := nodeRun(t, k, env, in, c...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	placed := port.Addresses
	port.Addresses = []string{"10.0.0.10/24"}
	if err := k.Configure(ctx, env, in, n, port, placed, false); err != nil {
		t.Fatal(err)
	}
	out, _ := nodeRun(t, k, env, in, "ip", "-o", "link", "show", "eth1")
	if addrs, _ := nodeRun(t, k, env, in, "ip", "-o", "addr", "show", "eth1"); strings.Contains(out, ",UP") || !strings.Contains(addrs, "10.0.0.10/24") {
		t.Errorf("Configure of addresses only: eth1 is\n%s%s\nwant it down (as the node set it) with 10.0.0.10/24", out, addrs)
	}
	if got, _ := nodeRun(t, k, env, in, "cat", dad); strings.TrimSpace(got) != "1" {
		t.Errorf("Configure of addresses only: accept_dad is %q, the node set 1", got)
	}
	ms, ok := k.(kinds.MTUSetter)
	if !ok {
		return
	}
	if err := ms.SetMTU(ctx, env, in, n, port, 9000); err != nil {
		t.Fatal(err)
	}
	after, _ := nodeRun(t, k, env, in, "ip", "-o", "link", "show", "eth1")
	index := func(s string) string { i, _, _ := strings.Cut(s, ":"); return i }
	if addrs, _ := nodeRun(t, k, env, in, "ip", "-o", "addr", "show", "eth1"); index(after) != index(out) || !strings.Contains(after, " mtu 9000 ") || !strings.Contains(addrs, "10.0.0.50/24") {
		t.Errorf("SetMTU 9000: eth1 is\n%s%s\nwas\n%s\nwant the same interface with MTU 9000 and the node's 10.0.0.50/24", after, addrs, out)
	}
}

// nodeRun runs a command in a node: through its kind if the kind runs commands itself (a VM's
// guest agent), else by entering the node's namespaces.
func nodeRun(t *testing.T, k kinds.Node, env *kinds.Env, in kinds.Instance, argv ...string) (string, error) {
	if r, ok := k.(kinds.Runner); ok {
		var out strings.Builder
		code, err := r.Run(context.Background(), env, in, argv, nil, &out, &out)
		if err == nil && code != 0 {
			err = fmt.Errorf("%v exited with %d", argv, code)
		}
		return out.String(), err
	}
	cmd, err := noderuntime.Command(in.PID, argv...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ports makes the fixture's two ports as plain veth pairs (their other ends stay in the
// machine): link kinds need nothing else.
func ports(t *testing.T, fx *fixture) []netlink.Link {
	var out []netlink.Link
	for _, p := range fx.link.Ports {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.Name, MTU: fx.link.MTU}, PeerName: p.Name + "x"}); err != nil {
			t.Fatal(err)
		}
		dev, err := netdev.UpQuiet(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, dev)
	}
	return out
}

func TestLinkKindContract(t *testing.T) {
	_, names, _ := kinds.Names()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			k, _ := kinds.LinkKind(name)
			inMachine(t, func(fx *fixture) {
				ctx := context.Background()
				m := kinds.Members{Ports: ports(t, fx)}
				before := devices(t)
				if err := k.Leave(ctx, fx.env, fx.link, m); err != nil {
					t.Errorf("Leave before Join: %v", err)
				}
				for i := range 2 {
					if err := k.Join(ctx, fx.env, fx.link, m); err != nil {
						t.Fatalf("Join #%d: %v", i+1, err)
					}
				}
				joined := devices(t)
				if tr, ok := k.(kinds.TableReader); ok {
					checkTable(t, tr, fx.link, m)
				}
				for i := range 2 {
					if err := k.Leave(ctx, fx.env, fx.link, m); err != nil {
						t.Errorf("Leave #%d: %v", i+1, err)
					}
				}
				if after := devices(t); after != before {
					t.Errorf("after Join twice and Leave twice the machine has\n%s\nwant as before Join:\n%s\n(joined: %s)", after, before, joined)
				}
			})
		})
	}
}

func TestTunnelKindContract(t *testing.T) {
	_, _, names := kinds.Names()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			k, _ := kinds.TunnelKind(name)
			inMachine(t, func(fx *fixture) {
				ctx := context.Background()
				fx.env.Plan.Tunnel = name
				td, ok := k.(plan.TunnelDevices)
				if !ok {
					t.Fatalf("tunnel kind %s does not say its devices (plan.TunnelDevices)", name)
				}
				tun := plan.Tunnel{Host: "m2", Remote: netip.MustParseAddr("198.18.0.2"), Key: 0x1234,
					Device: plan.DeviceName(fx.env.Plan.NetID, 't', 7)}
				if _, encap := td.Devices(fx.link.Name, "m2"); encap != "" {
					tun.Encap = plan.DeviceName(fx.env.Plan.NetID, 'u', 7)
				}
				fx.link.Tunnels = []plan.Tunnel{tun}
				fx.link.Ports = fx.link.Ports[:1]
				p := ports(t, fx)
				before := devices(t)
				if err := k.Remove(ctx, fx.env, fx.link); err != nil {
					t.Errorf("Remove before Ensure: %v", err)
				}
				var first kinds.Members
				for i := range 2 {
					m, err := k.Ensure(ctx, fx.env, fx.link, p, true)
					if err != nil {
						t.Fatalf("Ensure #%d: %v", i+1, err)
					}
					if i == 0 {
						first = m
					} else if len(m.Tunnels) != len(first.Tunnels) || m.Tunnels[0].Attrs().Index != first.Tunnels[0].Attrs().Index {
						t.Errorf("Ensure twice gave other devices: %v then %v", first.Tunnels, m.Tunnels)
					}
				}
				if c, ok := k.(kinds.Counter); ok {
					if got := c.Counters(fx.env); got == nil {
						t.Errorf("Counter: Counters with a tunnel ensured = nil; want the machine's counters")
					}
				}
				// A crash half-way: the devices exist, the rest may not; Remove removes them.
				for i := range 2 {
					if err := k.Remove(ctx, fx.env, fx.link); err != nil {
						t.Errorf("Remove #%d: %v", i+1, err)
					}
				}
				if after := devices(t); after != before {
					t.Errorf("after Ensure twice and Remove twice the machine has\n%s\nwant as before:\n%s", after, before)
				}
				if _, err := k.Ensure(ctx, fx.env, fx.link, p, true); err != nil {
					t.Fatal(err)
				}
				netdev.Delete(tun.Device) // half of what Ensure made
				if err := k.Remove(ctx, fx.env, fx.link); err != nil {
					t.Errorf("Remove after a crash: %v", err)
				}
				if after := devices(t); after != before {
					t.Errorf("after Remove of a half-made tunnel the machine has\n%s\nwant as before:\n%s", after, before)
				}
			})
		})
	}
}

// devices describes the calling thread's namespace: its devices with their masters, and
// its tc filters, one line each.
func devices(t *testing.T) string {
	links, err := netdev.List()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range links {
		b.WriteString(l.Attrs().Name)
		if l.Attrs().MasterIndex != 0 {
			b.WriteString(" (enslaved)")
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			filters, _ := netlink.FilterList(l, parent)
			for _, f := range filters {
				if bf, ok := f.(*netlink.BpfFilter); ok {
					b.WriteString(" filter:" + bf.Name)
				}
			}
		}
		// Programs on the device's tcx hooks (the shortbridge and impairments where the
		// kernel has tcx), by name.
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
			if err != nil {
				continue // no tcx in this kernel
			}
			for _, ap := range res.Programs {
				name := fmt.Sprint(ap.ID)
				if p, err := ebpf.NewProgramFromID(ap.ID); err == nil {
					if info, err := p.Info(); err == nil {
						name = info.Name
					}
					p.Close()
				}
				b.WriteString(" " + at.String() + ":" + name)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// A wire link kind (kinds.Wire) makes its pair between two namespaces once: Wire again keeps
// it (same interfaces, MTU set in place), and an end left alone (its other node started anew)
// is replaced by a new pair.
func TestWireKindContract(t *testing.T) {
	_, names, _ := kinds.Names()
	for _, name := range names {
		k, _ := kinds.LinkKind(name)
		w, ok := k.(kinds.Wire)
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			inMachine(t, func(fx *fixture) {
				ctx := context.Background()
				var ns [2]netns.NsHandle
				for i := range ns {
					h, err := netnsutil.New()
					if err != nil {
						t.Fatal(err)
					}
					defer h.Close()
					ns[i] = h
				}
				before := devices(t)
				index := func(i int) (int, int) {
					h, err := netlink.NewHandleAt(ns[i])
					if err != nil {
						t.Fatal(err)
					}
					defer h.Close()
					l, err := h.LinkByName("eth1")
					if err != nil {
						t.Fatalf("node %d: %v", i, err)
					}
					return l.Attrs().Index, l.Attrs().MTU
				}
				for i, wantMade := range []bool{true, false} {
					made, err := w.Wire(ctx, fx.env, fx.link, ns, 1400+i)
					if err != nil || made != wantMade {
						t.Fatalf("Wire #%d: made %v, %v; want made %v", i+1, made, err, wantMade)
					}
				}
				a0, mtu := index(0)
				if mtu != 1401 {
					t.Errorf("MTU %d after Wire with 1401, want it set in place", mtu)
				}
				if after := devices(t); after != before {
					t.Errorf("Wire made devices in the machine:\n%s\nwant none (was %s)", after, before)
				}
				// Node b starts anew: a's end is left alone, and Wire makes a new pair.
				h, _ := netnsutil.New()
				defer h.Close()
				ns[1] = h
				if made, err := w.Wire(ctx, fx.env, fx.link, ns, 1401); err != nil || !made {
					t.Fatalf("Wire with b anew: made %v, %v; want a new pair", made, err)
				}
				if a1, _ := index(0); a1 == a0 {
					t.Errorf("a's end is still index %d: want the stale end replaced", a0)
				}
				index(1)
			})
		})
	}
}
