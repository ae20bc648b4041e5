package substrate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// A machine kept in memory (fakeMachine), with a node kind (fakenode) and a connector
// (fakebridge) that keep their nodes and joins in it: the reconciler's unit tests run Up, live
// changes and Down on it without root. Every change to it is an operation, counted; the fake
// can fail the Nth, or "die" at it: the process is killed there (its context is cancelled and
// no later operation reaches the machine), and the machine keeps what was done.

const (
	fakeNodeKind = "fakenode"
	fakeLinkKind = "fakebridge"
	fakeWireKind = "fakewire"
)

func init() {
	kinds.RegisterNode(fakeNodeKind, fakeNode{}, spec.NodeKind{})
	kinds.RegisterLink(fakeLinkKind, fakeBridge{}, spec.LinkKind{MinEndpoints: 2})
	// Not spec's wire kind (LinkKind.Wire): a link has it by `connector: fakewire`.
	kinds.RegisterLink(fakeWireKind, fakeWire{}, spec.LinkKind{MinEndpoints: 2, MaxEndpoints: 2})
}

var (
	errFakeFail = errors.New("fake machine: operation failed")
	errFakeDead = errors.New("fake machine: the process died")
)

// theFake is the machine the fake kinds act on: the one newFake made last (a test makes the
// machines it compares with, by fresh, before its own).
var theFake *fakeMachine

// fakeMachine is a machine in memory.
type fakeMachine struct {
	mu      sync.Mutex
	devs    map[string]*fakeDev  // by name
	nodes   map[string]*fakeProc // running nodes, by network id/node name
	kept    map[string]bool      // what fakenode keeps outside its nodes (a cgroup), by id/name
	addrs   map[string][]string  // addresses of node interfaces, by id/node/ifname
	helpers map[string]bool      // helper processes, by network id
	wires   map[string]fakePair  // the pairs of wire links, by link name
	index   int                  // the last ifindex given
	pid     int                  // the last pid given
	ops     []string             // the changes made, in order
	failAt  int                  // the failAt-th change fails (0: none)
	dies    bool                 // at failAt, the process dies instead: cancel, dead
	cancel  context.CancelFunc   // the run's context's
	dead    bool
}

type fakeDev struct {
	index, mtu int
	up         bool
	rate       uint64
	impair     dataplane.Impairment
	node       string // a port's node, as id/name
	ifname     string // a port's interface in its node, which goes with it (a veth pair)
	master     string // the device a connector joined it to
}

// fakePair is a wire link's pair: its ends (id/node/ifname@pid) and MTU.
type fakePair struct {
	ends string
	mtu  int
}

type fakeProc struct {
	pid    int
	digest string
	execs  int // how many times its start commands ran
}

func newFake() *fakeMachine {
	theFake = &fakeMachine{devs: map[string]*fakeDev{}, nodes: map[string]*fakeProc{},
		kept: map[string]bool{}, addrs: map[string][]string{}, helpers: map[string]bool{}, wires: map[string]fakePair{}}
	return theFake
}

// run returns a context for one run of the reconciler on the fake: an operation failAt fails
// (0: none), or with die the process dies at it.
func (f *fakeMachine) run(failAt int, die bool) context.Context {
	ctx, cancel := context.WithCancel(withMachine(context.Background(), f))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt, f.dies, f.cancel, f.dead, f.ops = failAt, die, cancel, false, nil
	return ctx
}

// op counts a change; it says whether the change is to fail, or whether the process is dead.
// Call with f.mu held.
func (f *fakeMachine) op(format string, args ...any) error {
	if f.dead {
		return errFakeDead
	}
	f.ops = append(f.ops, fmt.Sprintf(format, args...))
	if len(f.ops) != f.failAt {
		return nil
	}
	if f.dies {
		f.dead = true
		f.cancel()
		return errFakeDead
	}
	return fmt.Errorf("%w: #%d %s", errFakeFail, f.failAt, f.ops[len(f.ops)-1])
}

func (f *fakeMachine) read() error {
	if f.dead {
		return errFakeDead
	}
	return nil
}

func (f *fakeMachine) link(name string, d *fakeDev) netlink.Link {
	return &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name, Index: d.index, MTU: d.mtu}}
}

func (f *fakeMachine) Devices() ([]netlink.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netlink.Link
	for name, d := range f.devs {
		out = append(out, f.link(name, d))
	}
	return out, f.read()
}

func (f *fakeMachine) Device(name string) (netlink.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read(); err != nil {
		return nil, err
	}
	if d := f.devs[name]; d != nil {
		return f.link(name, d), nil
	}
	return nil, nil
}

// add makes a device. Call with f.mu held.
func (f *fakeMachine) add(name string, d *fakeDev) {
	f.index++
	d.index = f.index
	f.devs[name] = d
}

// change changes device name as do does, as the operation what.
func (f *fakeMachine) change(name, what string, do func(d *fakeDev)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("%s %s", what, name); err != nil {
		return err
	}
	d := f.devs[name]
	if d == nil {
		return fmt.Errorf("%s %s: no such device", what, name)
	}
	do(d)
	return nil
}

func (f *fakeMachine) DeleteDevice(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("delete %s", name); err != nil {
		return err
	}
	if d := f.devs[name]; d != nil && d.node != "" {
		delete(f.addrs, d.node+"/"+d.ifname)
	}
	delete(f.devs, name)
	return nil
}

func (f *fakeMachine) SetMTU(name string, mtu int) error {
	return f.change(name, "mtu", func(d *fakeDev) { d.mtu = mtu })
}

func (f *fakeMachine) SetCarrier(name string, up bool) error {
	return f.change(name, "carrier", func(d *fakeDev) { d.up = up })
}

func (f *fakeMachine) SetShaper(dev netlink.Link, rate uint64) error {
	return f.change(dev.Attrs().Name, "shaper", func(d *fakeDev) { d.rate = rate })
}

func (f *fakeMachine) SetImpairment(_ dataplane.Config, ifindex int, im dataplane.Impairment) error {
	f.mu.Lock()
	name := ""
	for n, d := range f.devs {
		if d.index == ifindex {
			name = n
		}
	}
	f.mu.Unlock()
	return f.change(name, "impair", func(d *fakeDev) { d.impair = im })
}

// DetachDelay: the fake has no delays; a port that is gone is an error, as in the kernel.
func (f *fakeMachine) DetachDelay(ifindex int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("detach delay %d", ifindex); err != nil {
		return err
	}
	for _, d := range f.devs {
		if d.index == ifindex {
			return nil
		}
	}
	return fmt.Errorf("detach delay from port %d: no such device", ifindex)
}

func (f *fakeMachine) EndHelpers(dir, stateID, netID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.op("end helpers %s", netID); err != nil {
		return err
	}
	delete(f.helpers, netID)
	return nil
}

func (f *fakeMachine) EndLinesExcept(_ []int, stateID, netID string, keep map[string]bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.op("end lines %s", netID)
}

func (f *fakeMachine) OpenPortNS(string) (netns.NsHandle, bool, error) {
	return netns.None(), false, nil
}

func (f *fakeMachine) MakePortNS(string) (netns.NsHandle, error) {
	return netns.None(), errors.New("the fake machine has no port namespaces")
}

func (f *fakeMachine) RemovePortNS(netID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.op("remove port namespace %s", netID)
}

func (f *fakeMachine) NodeKinds() map[string]kinds.Node {
	return map[string]kinds.Node{fakeNodeKind: fakeNode{}}
}

// stop ends node key with its ports and interfaces (a crash does this alone: what the kind
// keeps for the node stays). Call with f.mu held.
func (f *fakeMachine) stop(key string) {
	delete(f.nodes, key)
	for name, d := range f.devs {
		if d.node == key {
			delete(f.devs, name)
		}
	}
	for k := range f.addrs {
		if strings.HasPrefix(k, key+"/") {
			delete(f.addrs, k)
		}
	}
}

// state describes the machine, one sorted line per object, without ifindexes and pids (a node
// started again is the same node): what a test compares.
func (f *fakeMachine) state() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name, d := range f.devs {
		out = append(out, fmt.Sprintf("dev %s mtu=%d up=%v rate=%d impair=%+v node=%s master=%s",
			name, d.mtu, d.up, d.rate, d.impair, d.node, d.master))
	}
	for key, n := range f.nodes {
		out = append(out, fmt.Sprintf("node %s digest=%s execs=%d", key, n.digest, n.execs))
	}
	for key := range f.kept {
		out = append(out, "kept "+key)
	}
	for key, a := range f.addrs {
		out = append(out, fmt.Sprintf("addrs %s %v", key, a))
	}
	for id := range f.helpers {
		out = append(out, "helpers "+id)
	}
	for name, w := range f.wires {
		if !strings.Contains(w.ends, "@") {
			continue
		}
		// A pair whose nodes run: its ends without pids (a node started again is the same).
		ends := strings.Fields(w.ends)
		for i, e := range ends {
			key, _, _ := strings.Cut(e, "/")
			node, _, _ := strings.Cut(strings.TrimPrefix(e, key+"/"), "/")
			if p := f.nodes[key+"/"+node]; p == nil || !strings.HasSuffix(e, fmt.Sprintf("@%d", p.pid)) {
				ends = nil
				break
			}
			ends[i], _, _ = strings.Cut(e, "@")
		}
		if ends != nil {
			out = append(out, fmt.Sprintf("wire %s %v mtu=%d", name, ends, w.mtu))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// pids returns the pids of the running nodes, by id/name.
func (f *fakeMachine) pids() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for key, n := range f.nodes {
		out[key] = n.pid
	}
	return out
}
