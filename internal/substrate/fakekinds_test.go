package substrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The fake kinds of the reconciler's unit tests (fake_test.go): they keep their nodes and joins
// in theFake.

// fakeNode is a node kind whose nodes live in theFake: a node is a process, its ports are
// devices that go with it, and it keeps something outside its process (Sweeper).
type fakeNode struct{}

func nodeKey(env *kinds.Env, name string) string { return env.Plan.NetID + "/" + name }

func (fakeNode) Running(env *kinds.Env) (map[string]kinds.Instance, error) {
	f := theFake
	if f == nil { // an integration test of this package on the host: no fake nodes there
		return nil, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]kinds.Instance{}
	for key, n := range f.nodes {
		if id, name, _ := strings.Cut(key, "/"); id == env.Plan.NetID {
			out[name] = kinds.Instance{Kind: fakeNodeKind, Name: name, PID: n.pid, Digest: n.digest}
		}
	}
	return out, f.read()
}

func (fakeNode) Start(_ context.Context, env *kinds.Env, n *plan.Node) (kinds.Instance, error) {
	f := theFake
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("start %s", n.Name); err != nil {
		return kinds.Instance{}, err
	}
	f.pid++
	key := nodeKey(env, n.Name)
	f.nodes[key], f.kept[key] = &fakeProc{pid: f.pid, digest: n.Digest}, true
	return kinds.Instance{Kind: fakeNodeKind, Name: n.Name, PID: f.pid, Digest: n.Digest}, nil
}

func (fakeNode) Stop(_ context.Context, env *kinds.Env, in kinds.Instance) error {
	f := theFake
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("stop %s", in.Name); err != nil {
		return err
	}
	key := nodeKey(env, in.Name)
	f.stop(key)
	delete(f.kept, key)
	return nil
}

// Port makes a port with its interface's addresses; one of another MTU is made anew (the
// kind is not an MTUSetter).
func (fakeNode) Port(_ context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node, p plan.Port, mtu int) (netlink.Link, error) {
	f := theFake
	f.mu.Lock()
	defer f.mu.Unlock()
	if mtu == 0 {
		mtu = defaultMTU // the kernel's
	}
	if d := f.devs[p.Name]; d != nil && d.mtu == mtu {
		return f.link(p.Name, d), f.read()
	}
	if err := f.op("port %s", p.Name); err != nil {
		return nil, err
	}
	key := nodeKey(env, n.Name)
	if f.nodes[key] == nil || f.nodes[key].pid != in.PID {
		return nil, fmt.Errorf("port %s: node %s does not run as pid %d", p.Name, n.Name, in.PID)
	}
	d := &fakeDev{mtu: mtu, node: key, ifname: p.Ifname}
	f.add(p.Name, d)
	f.addrs[key+"/"+p.Ifname] = slices.Clone(p.Addresses)
	return f.link(p.Name, d), nil
}

// Configure keeps the addresses trellis did not place and sets the plan's.
func (fakeNode) Configure(_ context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node, p plan.Port, placed []string, whole bool) error {
	f := theFake
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("configure %s/%s", n.Name, p.Ifname); err != nil {
		return err
	}
	key := nodeKey(env, n.Name) + "/" + p.Ifname
	var out []string
	for _, a := range f.addrs[key] {
		if !slices.Contains(placed, a) && !slices.Contains(p.Addresses, a) {
			out = append(out, a) // the node's software's
		}
	}
	f.addrs[key] = append(out, p.Addresses...)
	return nil
}

func (fakeNode) Exec(_ context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node) error {
	f := theFake
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("exec %s", n.Name); err != nil {
		return err
	}
	if p := f.nodes[nodeKey(env, n.Name)]; p != nil && p.pid == in.PID {
		p.execs++
	}
	return nil
}

// Sweep removes what the kind keeps for nodes of the network that do not run.
func (fakeNode) Sweep(env *kinds.Env, running map[string]kinds.Instance) error {
	f := theFake
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.kept {
		id, name, _ := strings.Cut(key, "/")
		if _, ok := running[name]; id != env.Plan.NetID || ok {
			continue
		}
		if err := f.op("sweep %s", key); err != nil {
			return err
		}
		delete(f.kept, key)
	}
	return f.read()
}

// fakeBridge is a connector: its device (the link's) with the members joined to it.
type fakeBridge struct{}

func (fakeBridge) Join(_ context.Context, _ *kinds.Env, l *plan.Link, m kinds.Members) error {
	f := theFake
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("join %s", l.Name); err != nil {
		return err
	}
	if f.devs[l.Device] == nil {
		f.add(l.Device, &fakeDev{mtu: defaultMTU, up: true})
	}
	for _, p := range append(slices.Clone(m.Ports), m.Tunnels...) {
		d := f.devs[p.Attrs().Name]
		if d == nil {
			return fmt.Errorf("join %s: no member %s", l.Name, p.Attrs().Name)
		}
		d.master = l.Device
	}
	return nil
}

func (fakeBridge) Leave(_ context.Context, _ *kinds.Env, l *plan.Link, m kinds.Members) error {
	f := theFake
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("leave %s", l.Name); err != nil {
		return err
	}
	for _, d := range f.devs {
		if d.master == l.Device {
			d.master = ""
		}
	}
	delete(f.devs, l.Device)
	return nil
}

func (fakeBridge) Direct() bool { return false }

// Netns: a fake node has no namespace; fakeWire, the only one to ask, needs none.
func (fakeNode) Netns(kinds.Instance) (netns.NsHandle, error) { return netns.None(), nil }

// fakeWire is a wire link kind (kinds.Wire): one pair between its two nodes' interfaces, kept
// in theFake with the pids of the nodes it joins; a node started anew needs a new pair.
type fakeWire struct{ fakeBridge }

func (fakeWire) Wire(_ context.Context, env *kinds.Env, l *plan.Link, _ [2]netns.NsHandle, mtu int) (bool, error) {
	f := theFake
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("wire %s", l.Name); err != nil {
		return false, err
	}
	ends := make([]string, 2)
	for i, port := range l.Ports {
		key := nodeKey(env, port.Node)
		if f.nodes[key] == nil {
			return false, fmt.Errorf("wire %s: node %s does not run", l.Name, port.Node)
		}
		ends[i] = fmt.Sprintf("%s/%s@%d", key, port.Ifname, f.nodes[key].pid)
	}
	was, ok := f.wires[l.Name]
	f.wires[l.Name] = fakePair{ends: strings.Join(ends, " "), mtu: mtu}
	if ok && was.ends == f.wires[l.Name].ends {
		return false, nil // kept, its MTU set in place
	}
	for _, port := range l.Ports { // new interfaces: what the old ones had is gone
		delete(f.addrs, nodeKey(env, port.Node)+"/"+port.Ifname)
	}
	return true, nil
}
