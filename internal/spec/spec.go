// Package spec reads a topology file into a virtual network: it parses the YAML, rejects what
// is malformed with errors naming the file, line and field (every problem of the file at once),
// and fills in defaults. It knows nothing of the kernel; the plan and substrate layers take a
// validated Network from here. Node, link and tunnel kinds register themselves here (kinds.go)
// and check their own fields through this package.
package spec

import "net/netip"

// Connector kinds: what joins the ports of a virtual link in the substrate.
// Kept while other packages still name them; kinds register by name (kinds.go) instead.
const (
	Shortbridge = "shortbridge" // eBPF hand-over between the two ports of a point-to-point link
	Bridge      = "bridge"      // Linux bridge, for LANs
	LAN         = "lan"         // the eBPF LAN connector: learning table, flooding by cloning
)

// Tunnel kinds: how a virtual link crosses between physical machines.
const (
	EGRE  = "egre"  // Ethernet in keyed GRE, in eBPF (docs/design.md, decision 6)
	VXLAN = "vxlan" // the kernel's VXLAN device
)

// Defaults for what a topology file leaves out.
const (
	DefaultNodeKind = "container" // a node without `kind:`
	// DefaultP2PConnector joins a two-endpoint link without `connector:` (or with `connector:
	// auto`) when it needs ports; while it has nothing to enforce, it is one veth pair between
	// its nodes, with no port (docs/design.md, decision 5).
	DefaultP2PConnector = "shortbridge"
	DefaultLANConnector = LAN    // a link of three or more endpoints without `connector:`
	DefaultTunnel       = "egre" // a file with `hosts:` and without `tunnel:`
	// AutoConnector, `connector: auto`: what a point-to-point link without `connector:` gets
	// (DefaultP2PConnector's ports only when it needs them), written out.
	AutoConnector = "auto"
)

// Link states: a link's initial carrier state.
const (
	StateUp   = "up"
	StateDown = "down"
)

// Network is one user's virtual network as declared in a topology file.
type Network struct {
	Name   string
	File   string  // path of the topology file, for messages
	Hosts  []*Host // the physical machines it spans; none for a single machine
	Tunnel string  // a registered tunnel kind; set when there are hosts
	// TunnelSecret, when set, keys the tunnels' keys (plan.TunnelKey) so that they cannot be
	// derived from the names: the content of the file `secret:` names, or in a cluster the
	// placement's secret.
	TunnelSecret []byte `json:"-"`
	// TunnelSettings are the tunnel kind's own settings, keys of `tunnel:` beside `kind:`
	// (TunnelKindSettings reads them); nil if it has none.
	TunnelSettings *KindSettings `json:",omitempty"`
	Nodes          []*Node
	Links          []*Link

	lines       map[string]int // line of each top-level key's value ("name", "tunnel", "hosts", ...)
	tunnelGiven []given        // the settings of tunnel kinds `tunnel:` gives, as read
}

// Host is a physical machine that holds part of a network.
type Host struct {
	Name    string
	Address netip.Addr // underlay IPv4 address: tunnels run between these
	MTU     int        // underlay MTU; links that cross machines get this minus the tunnel's overhead
	// Capacity is what the machine offers to placement (cpu cores, memory, NIC rate).
	Capacity Capacity
	Line     int
}

// Node is a virtual host: a container with its own network stack, or another registered kind.
type Node struct {
	Name string
	Kind string // a registered node kind; DefaultNodeKind unless the file says otherwise
	Host string // the machine it must run on; "" lets the plan place it
	// Addresses maps an interface name (a link endpoint's, or "lo") to its CIDR addresses.
	Addresses map[string][]string
	Exec      []string          // shell commands run in order at start, inside the node
	Files     []File            // written into the node's private file system before Exec
	Sysctl    map[string]string // net.* sysctls; forwarding defaults filled in
	// Needs is what placement counts for the node: cpu cores and memory. The node kind also
	// enforces them as limits (container: a CFS quota of Needs.CPU cores, Needs.Memory bytes).
	Needs Capacity `json:",omitzero"`
	// Cpuset lists the cores the node may run on ("0-1,3"); "" means any.
	Cpuset string `json:",omitempty"`
	// DefaultMemory is, in a cluster, the memory limit of a node without `memory:`
	// (clusterlimits.go): its kind enforces it and its tenant's quota counts it; placement
	// does not. 0 elsewhere.
	DefaultMemory uint64 `json:",omitempty"`
	// Pids limits the node's processes and threads; 0 means the node kind's default.
	Pids int64 `json:",omitempty"`
	// Settings are the settings of the node's kind under its own key (a VM's `vm:`), or nil:
	// read them with KindSettings (settings.go). Their JSON name is "VM", the one kind with
	// settings when they were a field of their own, so that records and digests stay as
	// they were.
	Settings *KindSettings `json:"VM,omitempty"`
	// Rootfs is the node's own root directory (`rootfs:`, rootfs.go), absolute and without
	// symbolic links; "" means the host's root.
	Rootfs string `json:",omitempty"`
	// Image is the container image the node runs (`image:`, image.go); up sets Rootfs to its
	// unpacked tree and Run to what its config says to run.
	Image string    `json:",omitempty"`
	Run   *ImageRun `json:",omitempty"`
	// ImageSet is what the file changes of the image's config (entrypoint:, cmd:, env:,
	// keep-entrypoint:); nil if nothing.
	ImageSet *ImageOverride `json:",omitempty"`
	// Engines are the node's parallel forwarding engines (docs/design.md, decision 12); none
	// for a node that forwards by itself. Dispatch is set when Engines are.
	Engines  []Engine  `json:",omitempty"`
	Dispatch *Dispatch `json:",omitempty"`
	// Dataplane is the node's own forwarding program (dataplane.go); nil: the node's kernel forwards.
	Dataplane *Dataplane `json:",omitempty"`
	Line      int

	index   int            // position in the file's nodes, for field names in messages
	lines   map[string]int // line of each key's value: "kind", "host", "addresses.eth1", ...
	ifnames []string       // the keys of Addresses in file order, for messages in that order
	given   []given        // the settings keys of kinds the node gives, as read
}

// File is one file written into a node.
type File struct {
	Path    string // absolute, under one of the node's private writable directories
	Content string // inline, or read from the source path given in the topology file
	// Mode is the file's permission bits (0 means 0644); Owner its owner inside the node,
	// "USER" or "USER:GROUP", names or numbers ("" means root).
	Mode  uint32 `json:",omitempty"`
	Owner string `json:",omitempty"`
}

// Link is a virtual link: point-to-point (two endpoints) or a LAN (two or more).
type Link struct {
	// Name is the name written in the file or, without one, the endpoints' strings sorted and
	// joined with "--" (a:eth1--b:eth1): stable when the file is reordered.
	Name      string
	Endpoints []Endpoint
	Rate      uint64 // bits per second; 0 means no cap
	RateText  string // as written, for display
	MTU       int    // 0 means the kernel default
	Connector string // a registered link kind: DefaultP2PConnector or DefaultLANConnector unless given
	// DefaultConnector: the file names no connector (or `connector: auto`) for a
	// point-to-point link, so the plan may join it with the wire kind instead while it has
	// nothing to enforce (plan.Wirer); Connector is the default one whenever it needs ports.
	DefaultConnector bool   `json:",omitempty"`
	State            string // StateUp or StateDown: the initial carrier state
	// Settings are the settings of the link's kind among its keys (the lan connector's
	// `table:` and `ageing:`), or nil: read them with KindSettings (linksettings.go).
	Settings *KindSettings `json:",omitempty"`
	// Impair applies to the frames sent by every endpoint, unless From says otherwise.
	Impair Impairment
	// From maps an endpoint ("node:ifname") to the impairment of the frames that endpoint sends:
	// the link-level Impair with the fields given under `from:` replaced (already merged).
	From map[string]Impairment
	Line int
	// TunnelKey is, in a cluster, the key of the link's tunnels as the placer allocated it
	// (unique in the cluster, set by the agent from the placement); 0: the key its names
	// derive (plan.TunnelKey).
	TunnelKey uint32 `json:",omitempty"`

	MTULine int // line of the mtu, for messages of later layers (also FieldLine("mtu"))

	index      int                        // position in the file's links, for field names in messages
	named      bool                       // the name was written in the file, not derived
	incomplete bool                       // the endpoints could not all be read (and were reported)
	lines      map[string]int             // line of each key's value: see FieldLine
	fromGiven  map[string]map[string]bool // per `from:` key, the impairment keys it gives
	given      []given                    // the settings of link kinds whose keys the link gives
}

// Endpoint is one virtual interface on a link.
type Endpoint struct {
	Node   string
	Ifname string
	Line   int
}

func (e Endpoint) String() string { return e.Node + ":" + e.Ifname }

// Node returns the node with the given name, or nil.
func (n *Network) Node(name string) *Node {
	for _, nd := range n.Nodes {
		if nd.Name == name {
			return nd
		}
	}
	return nil
}

// Host returns the host with the given name, or nil.
func (n *Network) Host(name string) *Host {
	for _, h := range n.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// FieldLine returns the line of a top-level key's value ("name", "hosts", "tunnel", "nodes",
// "links"), or 0 when the file does not give it.
func (n *Network) FieldLine(field string) int { return n.lines[field] }

// FieldLine returns the line of one of the node's keys ("kind", "host", "addresses",
// "addresses.IFNAME", "exec", "files", "sysctl", "engines", "dispatch"), or the node's own line when the file does not
// give that key.
func (nd *Node) FieldLine(field string) int { return lineOr(nd.lines[field], nd.Line) }

// FieldLine returns the line of one of the link's keys, or the link's own line when the file
// does not give that key. Keys: "name", "endpoints", "rate", "mtu", "connector", "state", its kind's settings keys,
// "loss", "duplicate", "corrupt", "delay", "jitter", "distribution", "from", "from.NODE:IF" and
// "from.NODE:IF.KEY" (KEY one of the impairment keys).
func (l *Link) FieldLine(field string) int { return lineOr(l.lines[field], l.Line) }

// ImpairmentFrom returns the impairment of the frames sent by endpoint e: its `from:` entry
// merged over the link-level fields, or the link-level fields alone.
func (l *Link) ImpairmentFrom(e Endpoint) Impairment {
	if im, ok := l.From[e.String()]; ok {
		return im
	}
	return l.Impair
}

// lineOr returns line, or def when line is unknown (0).
func lineOr(line, def int) int {
	if line == 0 {
		return def
	}
	return line
}
