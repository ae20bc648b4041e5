package spec

import (
	"fmt"
	"net/netip"
	"strconv"

	"gopkg.in/yaml.v3"
)

// DefaultUnderlayMTU is a host's underlay MTU unless the file says otherwise.
const DefaultUnderlayMTU = 1500

// machines reads the `hosts:` section (the physical machines a network spans) and `tunnel:`.
func (p *parser) machines(n *Network, hosts, tunnel *yaml.Node) error {
	if tunnel != nil {
		if hosts == nil {
			return p.errf(tunnel, "tunnel", "a tunnel needs hosts to run between", "add a `hosts:` section, or remove `tunnel:`")
		}
		if tunnel.Value != EGRE && tunnel.Value != VXLAN {
			return p.errf(tunnel, "tunnel", fmt.Sprintf("unknown tunnel %q", tunnel.Value), "write egre or vxlan")
		}
		n.Tunnel = tunnel.Value
	}
	if hosts == nil {
		return nil
	}
	if n.Tunnel == "" {
		n.Tunnel = EGRE
	}
	if hosts.Kind != yaml.MappingNode || len(hosts.Content) == 0 {
		return p.errf(hosts, "hosts", "expected a mapping from machine name to machine", "write e.g. `m1: {address: 198.18.0.1}`")
	}
	seen := map[netip.Addr]string{}
	for i := 0; i+1 < len(hosts.Content); i += 2 {
		k, v := hosts.Content[i], hosts.Content[i+1]
		field := "hosts." + k.Value
		if err := checkName(p, k, field, k.Value, maxNodeName); err != nil {
			return err
		}
		if n.Host(k.Value) != nil {
			return p.errf(k, field, "duplicate host name", "give every host a different name")
		}
		f, err := p.fields(v, field, "address", "mtu")
		if err != nil {
			return err
		}
		h := &Host{Name: k.Value, MTU: DefaultUnderlayMTU, Line: k.Line}
		a := f["address"]
		if a == nil {
			return p.errf(v, field+".address", "missing", "give the machine's underlay IPv4 address, e.g. `address: 198.18.0.1`")
		}
		if h.Address, err = netip.ParseAddr(a.Value); err != nil || !h.Address.Is4() {
			return p.errf(a, field+".address", fmt.Sprintf("%q is not an IPv4 address", a.Value), "write the machine's underlay IPv4 address without a prefix length, e.g. 198.18.0.1")
		}
		if other, dup := seen[h.Address]; dup {
			return p.errf(a, field+".address", "host "+other+" has the same address", "give every host its own address")
		}
		seen[h.Address] = h.Name
		if m := f["mtu"]; m != nil {
			if h.MTU, err = strconv.Atoi(m.Value); err != nil || h.MTU < 576 || h.MTU > maxMTU {
				return p.errf(m, field+".mtu", fmt.Sprintf("%q is not an MTU", m.Value), fmt.Sprintf("give the underlay MTU, a whole number from 576 to %d", maxMTU))
			}
		}
		n.Hosts = append(n.Hosts, h)
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

// TunnelOverhead is what a tunnel adds to each frame: the inner frame's Ethernet header plus
// the outer IPv4 and GRE (8 with a key) or UDP and VXLAN headers.
func TunnelOverhead(tunnel string) int {
	if tunnel == VXLAN {
		return 14 + 20 + 8 + 8
	}
	return 14 + 20 + 8
}

// validateHosts checks that nodes name known hosts.
func validateHosts(n *Network) error {
	for _, nd := range n.Nodes {
		if nd.Host == "" || n.Host(nd.Host) != nil {
			continue
		}
		fix := "name one of the hosts under `hosts:`, or remove `host:` to let trellis place the node"
		if len(n.Hosts) == 0 {
			fix = "add a `hosts:` section listing the machines, or remove `host:`"
		}
		return &Error{n.File, nd.hostLine, "nodes." + nd.Name + ".host", fmt.Sprintf("no host named %q", nd.Host), fix}
	}
	return nil
}
