// Package engines runs the parallel forwarding engines (FEs) of the nodes that have them
// (PdP; docs/design.md, decision 12, and docs/engines.md).
//
// A node with `engines: N` is a normal node, the control node: its daemons run there and it
// owns its addresses. For each such node trellis starts one helper process, "trellis-engines",
// in the substrate. The helper makes N FEs, each an anonymous network namespace with a copy of
// each of the node's link interfaces (same names, MACs and MTU, forwarding on), whose
// substrate ends are devices named tr<net-id>e<n>; it loads the node's classifier and dispatcher
// (internal/dataplane, bpf/engines.c), puts the classifier on the egress of the node's ports
// and the dispatcher on the FE ends; and it mirrors the control node's addresses, routes and
// neighbours into every FE from a netlink watch, in order. The helper holds the FEs'
// namespaces: killing it frees them and their devices. It ends by itself when the control
// node's init ends, and the reconciler starts it again (Converge) when it is missing or its
// configuration changed. down kills it (Remove).
package enginehelper

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/trellisnet/trellis/internal/helperproc/marked"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// Arg0 is the name the helper runs under; with the arguments after it, it marks the process as
// the engines of one node of one network of one state directory.
const Arg0 = "trellis-engines"

// Errors.
var (
	ErrConfig  = errors.New("engines: bad configuration")
	ErrHelper  = errors.New("engines: helper")
	ErrControl = errors.New("engines: control node")
)

// Config is what a node's helper needs; it travels as JSON on the helper's stdin. Its digest
// marks the helper, so a helper whose node, ports or engines changed is recognised and replaced.
type Config struct {
	StateDir string
	NetID    string
	Node     string
	Control  int // pid of the control node's init
	Dispatch spec.Dispatch
	Engines  []spec.Engine
	Ifaces   []Iface
	Sysctl   map[string]string // the node's sysctls, applied in each FE too
	// For engines on other machines (docs/engines.md, "Engines on other machines"): the
	// network's name (their VNIs and ports derive from it), this machine's underlay address
	// and the other machines' by name. A holder (Control 0) holds the engines Here of a node
	// of machine Home.
	Network string            `json:",omitempty"`
	Local   string            `json:",omitempty"`
	Peers   map[string]string `json:",omitempty"`
	Home    string            `json:",omitempty"`
	Here    []int             `json:",omitempty"`
	// VM: the node is a VM (Control is its QEMU) and its engines are VMs whose taps are the
	// FEPorts (vmfe.go); Own are its addresses on no link interface (loopback), which the
	// classifier sends to it.
	VM  bool     `json:",omitempty"`
	Own []string `json:",omitempty"`

	stateID string // the helper's, from its Marker: it names a VM node's sockets
}

// VMEngines is a node kind (spec.NodeKind.Impl) whose nodes' engines are VMs of their own,
// with the node's QEMU as the control node (vmfe.go; docs/vm.md), rather than namespaces beside
// a container's init: the vm kind. EngineOwn returns node n's addresses on no link interface,
// which the classifier sends to the node itself (Config.Own).
type VMEngines interface {
	EngineOwn(n *plan.Node) []string
}

// Iface is one of the node's link interfaces, with its copies in the FEs.
type Iface struct {
	Name      string   // inside the node, and inside each FE
	Port      string   // the node's port in the substrate
	PortIndex int      // its ifindex now: a port made anew is another port
	MAC       string   // the node's MAC on it, which each copy has too
	MTU       int      // 0: the kernel's default
	Rate      uint64   `json:",omitempty"` // the link's cap, bits per second, towards the node (0: none)
	FEPorts   []string // the substrate end of each FE's copy
	Addresses []string `json:",omitempty"` // for the record; the FEs take the node's live ones
}

// ConfigFor returns the helper's configuration for node n of plan p, whose control node's init
// is pid control. A port that does not exist yet has index 0. Engines asking for a share of the
// cores get theirs from Shares, over this machine's cores.
func ConfigFor(stateDir string, p *plan.Plan, n *plan.Node, control int) (Config, error) {
	c := Config{StateDir: stateDir, NetID: p.NetID, Node: n.Name, Control: control, Sysctl: n.Sysctl}
	k, _ := spec.LookupNodeKind(n.Kind)
	if vm, ok := k.Impl.(VMEngines); ok {
		c.VM, c.Own = true, vm.EngineOwn(n)
	}
	for _, e := range n.Engines {
		if plan.Remote(e, p.Host) {
			c.Network, c.Local = p.Network, p.Local.String()
			if c.Peers == nil {
				c.Peers = map[string]string{}
			}
			c.Peers[e.Host] = p.Hosts[e.Host].String()
		}
	}
	if n.Dispatch != nil {
		c.Dispatch = *n.Dispatch
		c.Dispatch.Line = 0
	}
	var given [][]int
	if slices.ContainsFunc(n.Engines, func(e spec.Engine) bool { return e.Share > 0 }) {
		cores, err := Cores()
		if err != nil {
			return c, err
		}
		shares, err := Shares(p, cores)
		if err != nil {
			return c, err
		}
		given = shares[n.Name]
	}
	for i, e := range n.Engines {
		e.Line = 0
		if i < len(given) && given[i] != nil {
			e.CPUs = given[i]
		}
		c.Engines = append(c.Engines, e)
	}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Node != n.Name {
				continue
			}
			in := Iface{Name: port.Ifname, Port: port.Name, MAC: port.MAC, MTU: l.MTU, Rate: l.Rate, Addresses: port.Addresses}
			if dev, err := netlink.LinkByName(port.Name); err == nil {
				in.PortIndex = dev.Attrs().Index
			}
			for _, m := range n.FEPorts {
				in.FEPorts = append(in.FEPorts, m[port.Ifname])
			}
			c.Ifaces = append(c.Ifaces, in)
		}
	}
	return c, nil
}

// Digest identifies a configuration.
func (c Config) Digest() string { return marked.Digest(c) }

// helpers is the kind of helper the engines' is.
var helpers = marked.Kind{Arg0: Arg0, Err: ErrHelper, Timeout: 60 * time.Second}

// Marker returns the helper's command line for configuration c.
func Marker(stateID string, c Config) []string {
	return helpers.Marker(stateID, c.NetID, c.Node, c)
}

// Helper is a running helper found in /proc.
type Helper struct {
	PID    int
	Digest string
}

// Find returns the helpers of network netID of state directory stateID, by node name.
func Find(stateID, netID string) (map[string]Helper, error) {
	found, err := helpers.Find(stateID, netID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Helper, len(found))
	for name, m := range found {
		out[name] = Helper{PID: m.PID, Digest: m.Digest}
	}
	return out, nil
}

// StatusDir is where the helpers of network netID write their status.
func StatusDir(stateDir, netID string) string {
	return filepath.Join(stateDir, "engines", netID)
}

// StatusPath is the status file of node's helper.
func StatusPath(stateDir, netID, node string) string {
	return filepath.Join(StatusDir(stateDir, netID), node+".json")
}

// Status is what a helper reports about its node's engines.
type Status struct {
	PID     int
	Engines []EngineStatus
	Control uint64 // frames the classifier sent to the control node
	Policed uint64 `json:",omitempty"` // frames dropped by the links' rate caps
	Mirror  MirrorStatus
}

// EngineStatus is one FE.
type EngineStatus struct {
	Index      int
	Ports      map[string]string // interface -> substrate end
	Classified uint64            // frames the classifier sent to it
	CPUs       []int             `json:",omitempty"` // the cores its frames are steered to (given, or from its share)
	Share      float64           `json:",omitempty"` // the share of cores it asked for
	Host       string            `json:",omitempty"` // the machine holding it, when not this one
	Down       bool              `json:",omitempty"` // on another machine and not reached, or its VM gone: no frames
	VM         bool              `json:",omitempty"` // a VM (an engine of a VM node)
}

// MirrorStatus counts what the mirror copied into the FEs.
type MirrorStatus struct {
	Addresses, Routes, Neighbours int    // changes applied (to every FE)
	Errors                        int    // changes an FE refused
	LastError                     string `json:",omitempty"`
	LastMicros, MaxMicros         int64  // from the netlink event to the change applied in every FE
	Resyncs                       int    // times the watch lost changes and everything was copied anew
}

// ReadStatus reads the status a node's helper wrote, or nil if there is none.
func ReadStatus(stateDir, netID, node string) (*Status, error) {
	data, err := os.ReadFile(StatusPath(stateDir, netID, node))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: status of %s: %v", ErrHelper, node, err)
	}
	return &s, nil
}
