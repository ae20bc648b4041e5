// Package kinds holds the interfaces that node kinds, link kinds (connectors) and tunnel kinds
// implement, and the registry where each kind registers under the name topology files use for
// it (docs/design.md, decision 7). The substrate's reconciler works only through these interfaces;
// every kind lives in a package of its own below this one, and nothing outside a kind's package
// tests its name or a flag of it. Every operation is idempotent: doing it twice is doing it
// once, and undoing it after a crash half-way through undoes what exists.
//
// A kind is one package and one import line in internal/kinds/all (docs/architecture.md,
// "Adding a kind"). Its init registers it with the rules the spec layer checks and, if it has
// any, its own settings (spec.NodeSettings, spec.LinkSettings, spec.TunnelSettings: a YAML key
// or keys, a parser, a type), which the other layers keep opaque and the kind reads back from
// the plan. What only the kind knows, the other layers ask it through optional interfaces
// defined where they are asked: spec.Taker (which of rootfs, image, env, engines, dataplane its
// nodes take), plan.Wirer, plan.NodeDigester, plan.TunnelDevices, enginehelper.VMEngines, and
// those of this package (Namespaced, MTUSetter, Runner, Counter, ...). example_test.go and
// example_tunnel_test.go are a node kind and a tunnel kind with settings, whole, in tests.
package kinds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// ErrUnknownKind is returned for a kind name nothing registered.
var ErrUnknownKind = errors.New("unknown kind")

// Env is what a kind gets to work on one network on this machine.
type Env struct {
	Store *state.Store
	Plan  *plan.Plan   // the desired state of the network on this machine
	Log   *slog.Logger // progress (`up -v`); nil: none
	// Dataplane is how the kinds attach their programs to ports (the hook, the EGRE route).
	Dataplane dataplane.Config
	// ImageCache is where images and kernels are kept ("": image.DefaultCache).
	ImageCache string
	// Recorded are the network's other plans that its record holds (the plan last applied, the
	// target of a change under way or interrupted): what a Sweeper may find left over of,
	// besides Plan. The substrate sets it for Sweep only.
	Recorded []*plan.Plan
	// Listed, when set, is what one listing of the machine, shared by the applies of many
	// networks, found of this network (substrate.Snapshot), taken after the network's last
	// apply or removal on this machine ended: only that network's applies start its processes
	// and make its control groups, so none is missing from it (some may have ended since).
	// The kinds look there instead of in every process and control group of the machine. nil:
	// they look everywhere.
	Listed *Listed
}

// Listed is what a shared listing of the machine found (Env.Listed).
type Listed struct {
	PIDs   []int    // the processes whose command line names the network (a superset of its own)
	Groups []string // the control groups under cgroup.Parent whose name names the network
	// UIDBases returns the first host uid of the user namespace of every node init on the
	// machine, whatever its state directory (noderuntime.UIDBases), as of the listing.
	UIDBases func() (map[uint32]bool, error)
}

// Processes returns the listing's processes, or nil (every process) without a listing.
func (l *Listed) Processes() []int {
	if l == nil {
		return nil
	}
	return l.PIDs
}

// UIDBases returns the listing's UIDBases if env has one, else scan (which reads /proc).
func UIDBases(env *Env, scan func() (map[uint32]bool, error)) func() (map[uint32]bool, error) {
	if env.Listed != nil && env.Listed.UIDBases != nil {
		return env.Listed.UIDBases
	}
	return scan
}

// Groups returns the control groups of env.Listed that begin with prefix, and whether env has
// a listing (without one, the kind lists the machine's groups itself).
func Groups(env *Env, prefix string) ([]string, bool) {
	if env.Listed == nil {
		return nil, false
	}
	out := []string{}
	for _, g := range env.Listed.Groups {
		if strings.HasPrefix(g, prefix) {
			out = append(out, g)
		}
	}
	return out, true
}

// Instance is a running node.
type Instance struct {
	Kind   string
	Name   string
	PID    int    // the process that holds the node (its init, or QEMU)
	Digest string // the settings it was started with (plan.Digest), or PartGone
}

// PartGone is the digest Running gives a node of which a part is not running (an engine VM of
// a VM node was killed), and the reconciler a node whose start commands an interrupted apply
// did not finish: never a plan's, so the reconciler starts the node again.
const PartGone = "part-gone"

// Node is a node kind: it runs nodes and makes their virtual interfaces.
type Node interface {
	// Running finds the network's running nodes of this kind, by name, from the kernel.
	Running(env *Env) (map[string]Instance, error)
	// Start starts node n with its file system, sysctls and loopback addresses.
	Start(ctx context.Context, env *Env, n *plan.Node) (Instance, error)
	// Stop ends a node and everything in it; its ports go with it.
	Stop(ctx context.Context, env *Env, in Instance) error
	// Port makes the virtual interface p.Ifname in the node, its substrate end named p.Name,
	// with the node's addresses for it, and returns the substrate end. If the port exists,
	// Port returns it unchanged; a kind that is not an MTUSetter makes a port whose MTU is not
	// mtu anew (the link's MTU changed).
	Port(ctx context.Context, env *Env, in Instance, n *plan.Node, p plan.Port, mtu int) (netlink.Link, error)
	// Configure gives the virtual interface of port p the plan's addresses, live: it adds
	// p.Addresses and removes those of placed (the addresses trellis put there before, from the
	// file) that p.Addresses no longer has. Every other address of the interface (made by the
	// node's software: zebra, a user's `ip addr add`; or by the kernel) stays. With whole, it
	// also sets the node's sysctls for the interface and brings it up, as Port does for a port
	// it makes: the substrate asks for that only for a port it finds after an interrupted
	// change (it may be half configured); when only the port's addresses change, the
	// interface's state and sysctls are left as the node's software may have set them.
	Configure(ctx context.Context, env *Env, in Instance, n *plan.Node, p plan.Port, placed []string, whole bool) error
	// Exec runs the node's start commands.
	Exec(ctx context.Context, env *Env, in Instance, n *plan.Node) error
}

// MTUSetter is a node kind that changes the MTU of a node's virtual interface live: the same
// interface (same ifindex), with the addresses, routes, qdiscs and state the node's software
// gave it. The substrate sets the port's MTU itself, after the node's side. The virtual
// interfaces of a kind that is not an MTUSetter are made anew (Port, called for a port whose
// MTU is not the link's) when their link's MTU changes, and `trellis diff` says so.
type MTUSetter interface {
	SetMTU(ctx context.Context, env *Env, in Instance, n *plan.Node, p plan.Port, mtu int) error
}

// Usage is what a running node uses, from its control group.
type Usage struct {
	CPUSeconds float64 `json:"cpu_seconds"` // CPU time of all its processes since it started
	Memory     uint64  `json:"memory"`      // bytes, page cache and tmpfs files included
	Processes  int64   `json:"processes"`   // processes and threads
	OOMKills   int64   `json:"oom_kills"`   // processes killed for its memory limit
}

// Measurer is a node kind that can tell what a node uses (`trellis inspect`). The substrate
// asks for it with a type assertion: a kind need not have it.
type Measurer interface {
	Usage(env *Env, in Instance) (Usage, error)
}

// Ender is a node kind that can begin ending a node without waiting for it to be gone (a
// container: a signal to its init). The substrate ends every node that goes this way first,
// then Stops each, so that the nodes' ends overlap instead of following one another.
type Ender interface {
	End(env *Env, in Instance) error
}

// Sweeper is a node kind that keeps something outside its nodes' processes (container: their
// cgroups) and can find and remove what belongs to nodes of the network that no longer run
// (their trellis was killed before it could). The substrate calls Sweep under the network's
// lock, in `up` once nodes were stopped and in `down`, with the nodes that run, and with
// Env.Recorded set. Sweep's cost should grow with the network, not with the machine: it runs
// in every `up` of every network.
type Sweeper interface {
	Sweep(env *Env, running map[string]Instance) error
}

// Runner is a node kind whose nodes run commands through trellis (a VM's guest agent) rather
// than by being entered through their namespaces: trellis exec uses it. Run returns the
// command's exit code.
type Runner interface {
	Run(ctx context.Context, env *Env, in Instance, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// Terminal is a node kind whose nodes give interactive sessions through trellis (a VM's guest
// agent) rather than by being entered: trellis exec with a terminal uses it. Attach runs argv
// on a terminal of size rows x cols in the node, copies stdin to it and its output to stdout
// until it ends, resizes it to each size that comes on resize, and returns its exit code.
type Terminal interface {
	Attach(ctx context.Context, env *Env, in Instance, argv []string, size [2]uint16, stdin io.Reader, stdout io.Writer, resize <-chan [2]uint16) (int, error)
}

// Preparer is a node kind with work to do on a machine before any of its nodes start (a VM's
// guest image). The substrate calls Prepare before it changes anything, so a kind that cannot
// run here refuses the plan with nothing created.
type Preparer interface {
	Prepare(ctx context.Context, env *Env) error
}

// Tasker is a node kind whose nodes hold a known number of the host's tasks (processes and
// threads, each with a pid) while idle: the substrate refuses, before it starts anything, nodes
// that would not fit in what the host's kernel.pid_max and kernel.threads-max leave free. A
// kind that is not a Tasker counts one task per node.
type Tasker interface {
	Tasks(n *plan.Node) int
}

// Describer is a node kind whose nodes' interfaces trellis cannot read from a network
// namespace of theirs on the host (a VM's are in its guest): inspect asks the kind.
type Describer interface {
	Describe(ctx context.Context, env *Env, in Instance) (Detail, error)
}

// Detail is what a Describer tells of a running node.
type Detail struct {
	Interfaces []Interface
	Threads    []Thread // the node's host threads that matter (a VM's vCPU and I/O threads)
	Notes      []string // e.g. "software emulation (TCG)"
}

// Interface is a node's virtual interface as the node sees it.
type Interface struct {
	netlink.LinkAttrs
	Addresses []string
}

// Thread is one host thread of a node.
type Thread struct {
	TID      int    `json:"tid"`
	Name     string `json:"name"`
	CPU      int    `json:"cpu"`               // the CPU it last ran on
	Affinity string `json:"affinity"`          // the CPUs it may run on, e.g. 0-1
	Policy   string `json:"policy"`            // other, fifo, rr, batch, idle, deadline
	Priority int    `json:"priority"`          // real-time priority (fifo, rr)
	Reserve  string `json:"reserve,omitempty"` // a deadline thread's runtime/period, e.g. 5ms/10ms
}

// Members are the substrate devices a connector joins: the link's ports on this machine, in
// plan order, and its tunnel devices to other machines.
type Members struct {
	Ports   []netlink.Link
	Tunnels []netlink.Link
	// EncapOnPort, when the tunnel kind offers it, makes a port encapsulate its frames
	// straight into the link's one tunnel, skipping the tunnel device (uncapped links).
	EncapOnPort func(port netlink.Link) error
}

// Link is a link kind: a connector that joins a link's members.
type Link interface {
	// Join makes the link forward between its members. It is called again whenever a member
	// was made anew or the link's rate changed, and must then update in place.
	Join(ctx context.Context, env *Env, l *plan.Link, m Members) error
	// Leave undoes Join but leaves the members, which the substrate deletes or keeps.
	Leave(ctx context.Context, env *Env, l *plan.Link, m Members) error
	// Direct tells whether frames of a tunnel may be handed straight to the link's one
	// local port (a point-to-point connector), rather than to the tunnel device.
	Direct() bool
}

// Namespaced is a node kind whose nodes keep their virtual interfaces in a network namespace
// of their own on this machine (a container): a wire link kind joins two of them, and its Port
// makes the substrate end of a port in the network namespace of the calling thread (the
// network's port namespace, when it has one).
type Namespaced interface {
	// Netns opens the network namespace of node in; the caller closes it.
	Netns(in Instance) (netns.NsHandle, error)
}

// IsNamespaced says whether node kind name is registered and Namespaced.
func IsNamespaced(name string) bool {
	k, err := NodeKind(name)
	_, ok := k.(Namespaced)
	return err == nil && ok
}

// Wire is a link kind that joins its two node interfaces directly, with nothing in the
// substrate (one veth pair between the nodes' namespaces, as native forwarding has): the plan
// chooses it for a point-to-point link with nothing to enforce (plan.Link.NeedsPorts), and
// the substrate calls Wire instead of making ports and joining them. A node kind's Port
// replaces a wire's end it finds where the port's interface goes (the link is re-plugged).
type Wire interface {
	// Wire makes the pair between interfaces l.Ports[0].Ifname in namespace ns[0] and
	// l.Ports[1].Ifname in ns[1] with MTU mtu, replacing a half or a stale one, and says
	// whether it made it (its interfaces are then to be configured whole). A whole pair is
	// kept, its MTU set in place.
	Wire(ctx context.Context, env *Env, l *plan.Link, ns [2]netns.NsHandle, mtu int) (made bool, err error)
}

// Tunnel is a tunnel kind: it carries links between machines.
type Tunnel interface {
	// Ensure makes the devices that carry link l to its other machines and returns those the
	// connector joins. ports are the link's local ports; direct says the connector lets the
	// tunnel deliver into ports[0].
	Ensure(ctx context.Context, env *Env, l *plan.Link, ports []netlink.Link, direct bool) (Members, error)
	// Remove deletes what Ensure made for link l.
	Remove(ctx context.Context, env *Env, l *plan.Link) error
}

// The kinds are registered in the spec layer's registry (spec.RegisterNodeKind, ...), the only
// one: with the rules spec checks, each holds its implementation (Impl), which the functions
// below return. A kind registered in spec alone (a test's) has none, and is unknown here.

// RegisterNode registers a node kind under name, with the rules the spec layer checks. It
// panics if the name is empty or taken; call it from the kind's init function.
func RegisterNode(name string, k Node, rules spec.NodeKind) {
	rules.Impl = k
	spec.RegisterNodeKind(name, rules)
}

// RegisterLink registers a link kind (connector) under name.
func RegisterLink(name string, k Link, rules spec.LinkKind) {
	rules.Impl = k
	spec.RegisterLinkKind(name, rules)
}

// RegisterTunnel registers a tunnel kind under name.
func RegisterTunnel(name string, k Tunnel, rules spec.TunnelKind) {
	rules.Impl = k
	spec.RegisterTunnelKind(name, rules)
}

// impl returns the implementation of kind name of the sort what, if it has one of type K.
func impl[K any](what, name string, rules any, found bool) (K, error) {
	k, ok := rules.(K)
	if !found || !ok {
		return k, fmt.Errorf("%s kind %q: %w", what, name, ErrUnknownKind)
	}
	return k, nil
}

// NodeKind returns the node kind registered as name.
func NodeKind(name string) (Node, error) {
	r, found := spec.LookupNodeKind(name)
	return impl[Node]("node", name, r.Impl, found)
}

// LinkKind returns the link kind registered as name.
func LinkKind(name string) (Link, error) {
	r, found := spec.LookupLinkKind(name)
	return impl[Link]("link", name, r.Impl, found)
}

// TunnelKind returns the tunnel kind registered as name.
func TunnelKind(name string) (Tunnel, error) {
	r, found := spec.LookupTunnelKind(name)
	return impl[Tunnel]("tunnel", name, r.Impl, found)
}

// NodeKinds returns every registered node kind by name, for finding running nodes.
func NodeKinds() map[string]Node {
	out := map[string]Node{}
	for _, name := range spec.NodeKinds() {
		if k, err := NodeKind(name); err == nil {
			out[name] = k
		}
	}
	return out
}

// Names lists the registered kinds of each sort, for tests and messages.
func Names() (node, link, tunnel []string) {
	return have(spec.NodeKinds(), NodeKind), have(spec.LinkKinds(), LinkKind), have(spec.TunnelKinds(), TunnelKind)
}

// have keeps the names that get finds a kind for.
func have[K any](names []string, get func(string) (K, error)) []string {
	out := []string{}
	for _, name := range names {
		if _, err := get(name); err == nil {
			out = append(out, name)
		}
	}
	return out
}
