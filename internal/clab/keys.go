package clab

// nodeKeys are the keys of a node definition (a node, the defaults, a kind's, a group's) that
// trellis honours; docs/containerlab.md says how.
var nodeKeys = []string{"kind", "group", "image", "image-pull-policy", "binds", "exec", "env", "cmd", "entrypoint",
	"labels", "sysctls", "cpu", "memory", "cpu-set", "hostname"}

// reason says why a key is refused, and what to do.
type reason struct{ msg, fix string }

var (
	noMgmt = reason{"trellis nodes have no management network: no eth0 to the host, nothing published on it; " +
		"a node is reached with `trellis exec NETWORK NODE`", "remove it"}
	vendorOnly = reason{"containerlab uses it for vendor kinds or its own tools; a trellis node is a Linux container (kind linux)",
		"remove it"}
	startupConfig = reason{"containerlab hands a startup configuration to vendor kinds; a linux node's software reads its own files",
		"put the file where the software reads it with binds, e.g. `- r1/frr.conf:/etc/frr/frr.conf`"}
	ownRoot = reason{"a trellis node's root has every capability over its own namespaces and no more, and that cannot be widened (docs/security.md)",
		"remove it"}
	ownNamespaces = reason{"trellis gives every node its own network, PID and cgroup namespaces and its own cgroup", "remove it"}
	ownTmpfs      = reason{"a trellis node's /tmp, /run and /dev/shm are its own tmpfs, sized from its memory", "remove it; give the node `memory:` instead"}
)

// refusedNodeKeys are containerlab's node keys that trellis cannot honour, with why.
var refusedNodeKeys = map[string]reason{
	"startup-config":          startupConfig,
	"enforce-startup-config":  startupConfig,
	"suppress-startup-config": startupConfig,
	"startup-delay":           {"trellis starts every node at once, in no order", "remove it; let a node's exec wait for what it needs"},
	"mgmt-ipv4":               noMgmt,
	"mgmt-ipv6":               noMgmt,
	"network-mode":            noMgmt,
	"ports":                   noMgmt,
	"dns":                     {"trellis sets no DNS servers in a node", "put an /etc/resolv.conf into the node with binds"},
	"restart-policy":          {"trellis does not restart a node's processes when they exit", "remove it"},
	"auto-remove":             {"trellis removes nodes with `trellis down`", "remove it"},
	"runtime":                 {"trellis builds its containers itself, with no container runtime", "remove it"},
	"user":                    {"a node's exec runs as the node's root", "remove it; start the software with its own user option (e.g. su -c)"},
	"env-files":               {"trellis does not read environment files", "write the variables under env"},
	"volumes":                 {"volumes are a container engine's; trellis copies host files into a node with binds", "use binds"},
	"devices":                 {"a trellis node's /dev holds only null, zero, full, random, urandom, tty and its own pseudo-terminals", "remove it"},
	"cap-add":                 ownRoot,
	"privileged":              ownRoot,
	"security-opts":           ownRoot,
	"cgroupns-mode":           ownNamespaces,
	"cgroup-parent":           ownNamespaces,
	"pid-mode":                ownNamespaces,
	"tmpfs":                   ownTmpfs,
	"shm-size":                ownTmpfs,
	"license":                 vendorOnly,
	"type":                    vendorOnly,
	"config":                  vendorOnly,
	"extras":                  vendorOnly,
	"components":              vendorOnly,
	"credentials":             vendorOnly,
	"username":                vendorOnly,
	"password":                vendorOnly,
	"certificate":             vendorOnly,
	"healthcheck":             vendorOnly,
	"stages":                  {"trellis starts every node at once and has no deployment stages", "remove it"},
	"aliases":                 noMgmt,
	"position":                {"it places the node in containerlab's graph; trellis lays out its graph itself", "remove it"},
	"link-apply-mode":         {"`trellis up` changes links live, never restarting a node for them", "remove it"},
}

// refusedTopKeys are containerlab's top-level keys that trellis cannot honour.
var refusedTopKeys = map[string]reason{
	"mgmt":     noMgmt,
	"prefix":   {"trellis names what it makes after the network itself", "remove it"},
	"settings": vendorOnly,
	"debug":    {"it is containerlab's log level", "remove it; `trellis up -v` says how long each step took"},
}

// refusedLinkTypes are containerlab's link types that trellis cannot honour (veth it can).
var refusedLinkTypes = map[string]reason{
	"host":         {"it joins a node to the host's own network namespace, which trellis leaves alone", "join the node to another node instead"},
	"mgmt-net":     noMgmt,
	"macvlan":      {"it joins a node to a host interface; trellis links stay between nodes", "join the node to another node instead"},
	"vxlan":        {"it tunnels to a remote host trellis does not manage", "spread the network over machines with trellis's hosts: (docs/multi-host.md)"},
	"vxlan-stitch": {"it tunnels to a remote host trellis does not manage", "spread the network over machines with trellis's hosts: (docs/multi-host.md)"},
	"veth-stitch":  vendorOnly,
	"dummy":        {"a trellis link joins two or more nodes; an interface with no peer is not one", "make it a loopback address (exec: ip addr add ... dev lo)"},
}

// nodeKinds are the kinds trellis runs: linux as a container node, bridge and ovs-bridge as a
// LAN joining the nodes linked to them.
const (
	kindLinux  = "linux"
	kindBridge = "bridge"
	kindOVS    = "ovs-bridge"
)
