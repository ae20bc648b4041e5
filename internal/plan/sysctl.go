package plan

import "strings"

// IfaceSysctls returns the node's sysctls for interface ifname, with duplicate address
// detection off unless the file says otherwise: addresses come from the topology, and
// detection would hold a router's IPv6 forwarding back for seconds. Keys use slashes (names
// may hold dots).
func (n *Node) IfaceSysctls(ifname string) map[string]string {
	values := map[string]string{"net/ipv6/conf/" + ifname + "/accept_dad": "0"}
	for k, v := range n.Sysctl {
		if SysctlIface(k) == ifname {
			values[k] = v
		}
	}
	return values
}

// NodeSysctls returns the node's sysctls but those of the interfaces in ifaces, which are set
// with the interfaces.
func (n *Node) NodeSysctls(ifaces map[string]bool) map[string]string {
	out := map[string]string{}
	for k, v := range n.Sysctl {
		if !ifaces[SysctlIface(k)] {
			out[k] = v
		}
	}
	return out
}

// SysctlIface returns the interface a per-interface sysctl names (net.ipv4.conf.IF.x,
// net.ipv6.conf.IF.x, net.ipv4.neigh.IF.x, net.ipv6.neigh.IF.x, written with dots or
// slashes), or "".
func SysctlIface(key string) string {
	sep := "."
	if strings.Contains(key, "/") {
		sep = "/"
	}
	parts := strings.Split(key, sep)
	if len(parts) < 5 || parts[0] != "net" || (parts[1] != "ipv4" && parts[1] != "ipv6") || (parts[2] != "conf" && parts[2] != "neigh") {
		return ""
	}
	return parts[3]
}

// Endpoints lists the interfaces of node name that are link endpoints in the plan.
func (p *Plan) Endpoints(name string) map[string]bool {
	out := map[string]bool{}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Node == name {
				out[port.Ifname] = true
			}
		}
	}
	return out
}

// FESysctls are what every forwarding engine (internal/enginehelper; an engine VM too) gets before
// the node's own sysctls: it forwards, and it sends no redirects (it is not where the node's
// neighbours should learn routes from).
var FESysctls = map[string]string{
	"net.ipv4.ip_forward":                  "1",
	"net.ipv6.conf.all.forwarding":         "1",
	"net.ipv4.conf.all.send_redirects":     "0",
	"net.ipv4.conf.default.send_redirects": "0",
	"net.ipv6.conf.default.accept_dad":     "0",
	"net.ipv6.conf.all.accept_dad":         "0",
}
