// Package guest is the agent that runs inside a VM node as the guest's first process, and the
// host's client for it. The agent mounts the guest's file systems, loads the drivers the image
// carries, and then serves requests from the host over a virtio-serial port: set the node up
// (hostname, files, sysctls, loopback addresses), configure a virtual interface found by its MAC
// address, and run commands. Requests and responses are JSON, one per line. Two more ports
// serve interactive sessions (tty.go) and the route mirror of a VM node with engines
// (internal/enginehelper).
package guest

import (
	"errors"
	"time"

	"github.com/trellisnet/trellis/internal/kinds"
)

// PortName is the name of the virtio-serial port the agent serves on.
const PortName = "trellis.agent"

// InitPath is where the image puts the agent (the trellis binary): the kernel starts it first.
const InitPath = "/init"

// ModuleOrder is the file in the image listing the kernel modules to load, in order, as paths
// relative to /lib/modules/VERSION.
const ModuleOrder = "/lib/modules/trellis.order"

// ErrAgent is wrapped by errors the agent reports.
var ErrAgent = errors.New("guest agent")

// Request is one request from the host.
type Request struct {
	ID uint64 `json:"id"`
	Op string `json:"op"` // ping, setup, configure, exec, links

	// setup
	Hostname string            `json:"hostname,omitempty"`
	Files    []File            `json:"files,omitempty"`
	Sysctl   map[string]string `json:"sysctl,omitempty"`
	Lo       []string          `json:"lo,omitempty"` // loopback addresses (prefixes)

	// configure
	Iface *Iface `json:"iface,omitempty"`

	// exec: argv runs with stdin; its output comes back, or, with Log, is appended to that file
	// in the guest (for daemons, which keep their output open).
	Argv    []string      `json:"argv,omitempty"`
	Stdin   string        `json:"stdin,omitempty"`
	Log     string        `json:"log,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"`
}

// File is a file the setup writes.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    uint32 `json:"mode,omitempty"`  // 0 = 0644
	Owner   string `json:"owner,omitempty"` // USER or USER:GROUP in the guest; "" = root
}

// Iface is a virtual interface's configuration: the guest's NIC with MAC gets Name, MTU (0
// leaves it), Addresses and Sysctl (keys under net.), and is brought up. Of its other
// addresses, those in Placed (put there by trellis before) are removed; the rest (the guest's
// software's, the kernel's) stay. With AddressesOnly (a live change of the file's addresses)
// only its addresses change: its name, MTU, sysctls and state stay as they are.
type Iface struct {
	MAC           string            `json:"mac"`
	Name          string            `json:"name"`
	MTU           int               `json:"mtu,omitempty"`
	Addresses     []string          `json:"addresses,omitempty"`
	Placed        []string          `json:"placed,omitempty"`
	Sysctl        map[string]string `json:"sysctl,omitempty"`
	AddressesOnly bool              `json:"addresses_only,omitempty"`
}

// Response answers the request with the same ID.
type Response struct {
	ID     uint64 `json:"id"`
	Error  string `json:"error,omitempty"`
	Exit   int    `json:"exit"`
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`

	Links []kinds.Interface `json:"links,omitempty"` // links: the guest's interfaces
}
