package spec

import (
	"fmt"
	"net/netip"
	"strconv"

	"gopkg.in/yaml.v3"
)

// DefaultUnderlayMTU is a host's underlay MTU unless the file says otherwise.
const DefaultUnderlayMTU = 1500

// minUnderlayMTU is the smallest underlay MTU a host may give (IPv4's minimum datagram).
const minUnderlayMTU = 576

// machines reads the `hosts:` section (the physical machines a network spans) and `tunnel:`.
func (p *parser) machines(n *Network, hosts, tunnel *yaml.Node) {
	if p.cluster {
		p.clusterMachines(n, hosts, tunnel)
		return
	}
	if tunnel != nil {
		name, ok := p.tunnelName(n, tunnel)
		switch _, known := tunnelKinds.lookup(name); {
		case !ok:
		case hosts == nil:
			p.fail(tunnel, "tunnel", "a tunnel needs hosts to run between", "add a `hosts:` section, or remove `tunnel:`")
		case !known:
			p.fail(tunnel, "tunnel", fmt.Sprintf("unknown tunnel %q", name), useOneOf(TunnelKinds()))
		default:
			n.Tunnel = name
		}
	}
	if hosts == nil {
		return
	}
	if tunnel == nil {
		n.Tunnel = DefaultTunnel
	}
	keys, vals, ok := p.pairs(hosts, "hosts", mapping{"expected a mapping from machine name to machine", "write e.g. `m1: {address: 198.18.0.1}`",
		"duplicate host name", "give every host a different name"})
	if !ok || len(keys) == 0 {
		if ok {
			p.fail(hosts, "hosts", "expected a mapping from machine name to machine", "write e.g. `m1: {address: 198.18.0.1}`")
		}
		p.hostsBad = true
		return
	}
	seen := map[netip.Addr]string{}
	for i, k := range keys {
		h := p.host(k, vals[i], seen)
		n.Hosts = append(n.Hosts, h)
	}
}

// host reads one machine of `hosts:`; seen holds the addresses of those before it.
func (p *parser) host(k, v *yaml.Node, seen map[netip.Addr]string) *Host {
	field := join("hosts", k.Value)
	h := &Host{Name: k.Value, MTU: DefaultUnderlayMTU, Line: k.Line}
	p.checkName(k, field, k.Value, maxNodeName)
	f, ok := p.fields(v, field, "address", "mtu", "cpu", "memory", "rate")
	if !ok {
		return h
	}
	h.Capacity = p.capacity(f, field, true)
	if a := f["address"]; a == nil {
		p.fail(v, field+".address", "missing", "give the machine's underlay IPv4 address, e.g. `address: 198.18.0.1`")
	} else if addr, err := netip.ParseAddr(a.Value); err != nil || !addr.Is4() || a.Kind != yaml.ScalarNode {
		p.fail(a, field+".address", fmt.Sprintf("%q is not an IPv4 address", a.Value), "write the machine's underlay IPv4 address without a prefix length, e.g. 198.18.0.1")
	} else if other, dup := seen[addr]; dup {
		p.fail(a, field+".address", "host "+other+" has the same address", "give every host its own address")
	} else {
		h.Address, seen[addr] = addr, h.Name
	}
	if m := f["mtu"]; m != nil {
		mtu, err := strconv.Atoi(m.Value)
		if err != nil || m.Kind != yaml.ScalarNode || mtu < minUnderlayMTU || mtu > maxMTU {
			p.fail(m, field+".mtu", fmt.Sprintf("%q is not an MTU", m.Value), fmt.Sprintf("give the underlay MTU, a whole number from %d to %d", minUnderlayMTU, maxMTU))
		} else {
			h.MTU = mtu
		}
	}
	return h
}

// clusterMachines reads `tunnel:` of a cluster's file, which has no `hosts:`.
func (p *parser) clusterMachines(n *Network, hosts, tunnel *yaml.Node) {
	if hosts != nil {
		p.fail(hosts, "hosts", "a cluster's machines are those whose agents registered, not listed in the file",
			"remove `hosts:`; pin a node with `host: MACHINE` if it must run on one")
	}
	n.Tunnel = DefaultTunnel
	if tunnel == nil {
		return
	}
	if name, ok := p.tunnelName(n, tunnel); ok {
		if _, known := tunnelKinds.lookup(name); !known {
			p.fail(tunnel, "tunnel", fmt.Sprintf("unknown tunnel %q", name), useOneOf(TunnelKinds()))
		}
		n.Tunnel = name
	}
}

// validateHosts checks that nodes name known hosts (in a cluster, the placer checks them).
func (p *parser) validateHosts(n *Network) {
	if p.cluster {
		return
	}
	for _, nd := range n.Nodes {
		if nd.Host == "" || n.Host(nd.Host) != nil {
			continue
		}
		fix := "name one of the hosts under `hosts:`, or remove `host:` to let trellis place the node"
		if len(n.Hosts) == 0 {
			fix = "add a `hosts:` section listing the machines, or remove `host:`"
		}
		p.add(n.NodeError(nd, "host", fmt.Sprintf("no host named %q", nd.Host), fix))
	}
}

// minSecret is the fewest bytes a `secret:` file may have.
const minSecret = 16

// secret reads `secret:`, the file whose content keys the tunnels' keys, the same file on every
// host (in a cluster the placer draws the secret).
func (p *parser) secret(n *Network, s *yaml.Node) {
	switch {
	case s == nil:
		return
	case p.cluster:
		p.fail(s, "secret", "a cluster's tunnel keys derive from a random secret the placer draws for the network", "remove `secret:`")
		return
	case len(n.Hosts) == 0:
		p.fail(s, "secret", "the secret keys the tunnels between hosts, and the network has none", "remove `secret:`, or add a `hosts:` section")
		return
	}
	errs := len(p.errs)
	data := p.source(s, "secret")
	if len(p.errs) > errs {
		return // p.source said why
	}
	if len(data) < minSecret {
		p.fail(s, "secret", fmt.Sprintf("the file has %d bytes, fewer than %d", len(data), minSecret),
			"fill it with random bytes, the same file on every host, e.g. `head -c 32 /dev/urandom > tunnel.key`")
		return
	}
	n.TunnelSecret = []byte(data)
}
