package spec

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// NodeKind is what the spec layer needs of a node kind (container, vm, ...): a check of the
// node's fields beyond the common ones. Check may be nil. Which of the keys only some kinds take
// (rootfs, engines, ...) its nodes take, the kind says itself (Taker).
type NodeKind struct {
	Check func(n *Network, nd *Node) []*Error
	// Settings, if not nil, reads the kind's own settings (settings.go); a node of another
	// kind may not have them.
	Settings *NodeSettings
	// DefaultMemory is the memory a node of the kind takes without `memory:` (a VM's guest),
	// which a cluster counts in its tenant's quota; 0: ClusterMemory, the default limit.
	DefaultMemory uint64
	// Impl is the kind itself (a kinds.Node), set by kinds.RegisterNode: this registry is the
	// only one, and the kinds package reads its kinds from here. The other layers ask it what
	// only the kind knows through interfaces it may implement (Taker here; plan.NodeDigester,
	// enginehelper.VMEngines, kinds.Namespaced, ...).
	Impl any
}

// The node keys that only some kinds take: a kind's nodes take those its Takes says.
const (
	KeyRootfs    = "rootfs"    // a root directory of the node's own (`rootfs:`)
	KeyImage     = "image"     // a container image as the node's root (`image:`)
	KeyEnv       = "env"       // environment variables of the node's processes
	KeyEngines   = "engines"   // parallel forwarding engines (docs/engines.md)
	KeyDataplane = "dataplane" // an eBPF data plane on the node's ports (docs/ebpf.md)
)

// Taker is a node kind (NodeKind.Impl) whose nodes take some of the keys only some kinds take
// (KeyRootfs, ...). A kind that is not a Taker takes none of them.
type Taker interface {
	// Takes says whether the kind's nodes take key. When they do not, why may word the
	// refusal where the general one ("a KIND node takes no rootfs") would not say why; its
	// zero value is the general one.
	Takes(key string) (ok bool, why Refusal)
}

// takes asks node kind k whether its nodes take key.
func (k NodeKind) takes(key string) (bool, Refusal) {
	if t, ok := k.Impl.(Taker); ok {
		return t.Takes(key)
	}
	return false, Refusal{}
}

// Refusal is a problem and its fix, as an Error says them.
type Refusal struct{ Msg, Fix string }

// LinkKind is what the spec layer needs of a link kind, named by a link's `connector:`: how
// many endpoints it joins (MaxEndpoints 0 means no maximum) and a check of the link's fields
// beyond the common ones. Check may be nil.
type LinkKind struct {
	MinEndpoints, MaxEndpoints int
	Check                      func(n *Network, l *Link) []*Error
	// Settings, if not nil, reads the kind's own settings among the link's keys
	// (linksettings.go); a link of another kind may not have them.
	Settings *LinkSettings
	// Impl is the kind itself (a kinds.Link), set by kinds.RegisterLink; the wire kind is a
	// plan.Wirer.
	Impl any
}

// TunnelKind is what the spec layer needs of a tunnel kind (egre, vxlan, ...): the bytes it
// adds to every frame and a check of the network (run when a file with hosts selects it). Check
// may be nil.
type TunnelKind struct {
	Overhead int
	Check    func(n *Network) []*Error
	// Settings, if not nil, reads the kind's own settings among the keys of `tunnel:`
	// (tunnelsettings.go); a network with another tunnel kind may not have them.
	Settings *TunnelSettings
	// Impl is the kind itself (a kinds.Tunnel), set by kinds.RegisterTunnel; it says which
	// devices carry a link (plan.TunnelDevices).
	Impl any
}

// registry holds kinds by the name used in topology files.
type registry[K any] struct {
	mu    sync.RWMutex
	what  string // "node kind", for panics
	kinds map[string]K
}

func (r *registry[K]) register(name string, k K) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" {
		panic("spec: registering a " + r.what + " without a name")
	}
	if _, dup := r.kinds[name]; dup {
		panic(fmt.Sprintf("spec: %s %q registered twice", r.what, name))
	}
	if r.kinds == nil {
		r.kinds = map[string]K{}
	}
	r.kinds[name] = k
}

func (r *registry[K]) lookup(name string) (K, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.kinds[name]
	return k, ok
}

func (r *registry[K]) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.kinds))
	for name := range r.kinds {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

var (
	nodeKinds   = &registry[NodeKind]{what: "node kind"}
	linkKinds   = &registry[LinkKind]{what: "link kind"}
	tunnelKinds = &registry[TunnelKind]{what: "tunnel kind"}
)

// RegisterNodeKind makes a node kind known by the name used in `kind:`. It panics if the name
// is empty or already registered; call it from an init function.
func RegisterNodeKind(name string, k NodeKind) {
	if k.Settings != nil {
		checkSettingsKey(name, k.Settings)
	}
	nodeKinds.register(name, k)
}

// RegisterLinkKind makes a link kind known by the name used in `connector:`. It panics if the
// name is empty or already registered, or if the endpoint bounds make no sense.
func RegisterLinkKind(name string, k LinkKind) {
	if k.MinEndpoints < 2 || (k.MaxEndpoints != 0 && k.MaxEndpoints < k.MinEndpoints) {
		panic(fmt.Sprintf("spec: link kind %q joins %d to %d endpoints: want at least 2, and max 0 or at least min", name, k.MinEndpoints, k.MaxEndpoints))
	}
	if k.Settings != nil {
		checkLinkSettings(name, k.Settings)
	}
	linkKinds.register(name, k)
}

// RegisterTunnelKind makes a tunnel kind known by the name used in `tunnel:`. It panics if the
// name is empty or already registered, or the overhead is negative.
func RegisterTunnelKind(name string, k TunnelKind) {
	if k.Overhead < 0 {
		panic(fmt.Sprintf("spec: tunnel kind %q with negative overhead %d", name, k.Overhead))
	}
	if k.Settings != nil {
		checkTunnelSettings(name, k.Settings)
	}
	tunnelKinds.register(name, k)
}

// LookupNodeKind returns the node kind registered under name.
func LookupNodeKind(name string) (NodeKind, bool) { return nodeKinds.lookup(name) }

// LookupLinkKind returns the link kind registered under name.
func LookupLinkKind(name string) (LinkKind, bool) { return linkKinds.lookup(name) }

// LookupTunnelKind returns the tunnel kind registered under name.
func LookupTunnelKind(name string) (TunnelKind, bool) { return tunnelKinds.lookup(name) }

// NodeKinds returns the names of the registered node kinds, sorted.
func NodeKinds() []string { return nodeKinds.names() }

// LinkKinds returns the names of the registered link kinds (connectors), sorted.
func LinkKinds() []string { return linkKinds.names() }

// TunnelKinds returns the names of the registered tunnel kinds, sorted.
func TunnelKinds() []string { return tunnelKinds.names() }

// TunnelOverhead is what a tunnel kind adds to each frame (for EGRE the inner Ethernet header,
// outer IPv4 and keyed GRE: 42 bytes), or 0 for a kind that is not registered.
func TunnelOverhead(kind string) int {
	k, _ := tunnelKinds.lookup(kind)
	return k.Overhead
}

// useOneOf is the fix for an unknown kind name: "use one of: a, b".
func useOneOf(names []string) string {
	if len(names) == 0 {
		return "no kinds are registered: this build of trellis cannot run it"
	}
	return "use one of: " + strings.Join(names, ", ")
}

// accepts says whether a link kind joins count endpoints.
func (k LinkKind) accepts(count int) bool {
	return count >= k.MinEndpoints && (k.MaxEndpoints == 0 || count <= k.MaxEndpoints)
}

// bounds describes a link kind's endpoint count for messages: "exactly 2", "2 or more", "2 to 4".
func (k LinkKind) bounds() string {
	switch {
	case k.MaxEndpoints == 0:
		return fmt.Sprintf("%d or more", k.MinEndpoints)
	case k.MaxEndpoints == k.MinEndpoints:
		return fmt.Sprintf("exactly %d", k.MinEndpoints)
	}
	return fmt.Sprintf("%d to %d", k.MinEndpoints, k.MaxEndpoints)
}
