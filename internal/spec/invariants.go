package spec

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
)

// CheckInvariants checks what the layers below rely on in a Network that Parse returned: names
// valid and unique, every endpoint on a declared node with a valid interface name used once,
// registered kinds, endpoint counts within the connector's bounds, MTUs, rates and impairments
// in range, defaults filled in. Parse never returns a Network that fails it; the fuzz test and
// tests of other layers (which may build Networks by hand) use it. It returns every violation.
func CheckInvariants(n *Network) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !nameRE.MatchString(n.Name) || len(n.Name) > maxNetworkName {
		bad("network name %q", n.Name)
	}
	checkHostInvariants(n, bad)
	nodes := map[string]bool{}
	for _, nd := range n.Nodes {
		checkNodeInvariants(n, nd, nodes, bad)
	}
	used := map[Endpoint]bool{}
	names := map[string]bool{}
	for _, l := range n.Links {
		checkLinkInvariants(l, nodes, used, bad)
		if names[l.Name] {
			bad("link name %q used twice", l.Name)
		}
		names[l.Name] = true
	}
	for _, nd := range n.Nodes {
		for ifname := range nd.Addresses {
			if ifname != "lo" && !used[Endpoint{Node: nd.Name, Ifname: ifname}] {
				bad("node %s: addresses on %s, which no link has", nd.Name, ifname)
			}
		}
	}
	return errors.Join(errs...)
}

func checkHostInvariants(n *Network, bad func(string, ...any)) {
	if _, ok := tunnelKinds.lookup(n.Tunnel); ok != (len(n.Hosts) > 0) {
		bad("tunnel %q with %d hosts", n.Tunnel, len(n.Hosts))
	}
	addrs, names := map[netip.Addr]bool{}, map[string]bool{}
	for _, h := range n.Hosts {
		if !nameRE.MatchString(h.Name) || len(h.Name) > maxNodeName || names[h.Name] {
			bad("host name %q invalid or used twice", h.Name)
		}
		names[h.Name] = true
		if !h.Address.Is4() || addrs[h.Address] {
			bad("host %s: address %v not IPv4 or used twice", h.Name, h.Address)
		}
		addrs[h.Address] = true
		if h.MTU < minUnderlayMTU || h.MTU > maxMTU {
			bad("host %s: mtu %d", h.Name, h.MTU)
		}
	}
}

func checkNodeInvariants(n *Network, nd *Node, seen map[string]bool, bad func(string, ...any)) {
	if !nameRE.MatchString(nd.Name) || len(nd.Name) > maxNodeName || seen[nd.Name] {
		bad("node name %q invalid or used twice", nd.Name)
	}
	seen[nd.Name] = true
	if _, ok := nodeKinds.lookup(nd.Kind); !ok {
		bad("node %s: kind %q not registered", nd.Name, nd.Kind)
	}
	if nd.Host != "" && n.Host(nd.Host) == nil {
		bad("node %s: host %q not declared", nd.Name, nd.Host)
	}
	for ifname, addrs := range nd.Addresses {
		for _, a := range addrs {
			if _, err := netip.ParsePrefix(a); err != nil {
				bad("node %s: address %q on %s", nd.Name, a, ifname)
			}
		}
	}
	for _, f := range nd.Files {
		if !fileInWritableDir(f.Path) {
			bad("node %s: file %q", nd.Name, f.Path)
		}
	}
	if nd.Rootfs != "" && (!filepath.IsAbs(nd.Rootfs) || filepath.Clean(nd.Rootfs) == "/") {
		bad("node %s: rootfs %q", nd.Name, nd.Rootfs)
	}
	for k := range nd.Sysctl {
		if !sysctlOK(k) {
			bad("node %s: sysctl %q", nd.Name, k)
		}
	}
	for k := range DefaultSysctl {
		if _, ok := nd.Sysctl[k]; !ok {
			bad("node %s: default sysctl %s missing", nd.Name, k)
		}
	}
	if err := engineInvariants(nd); err != nil {
		bad("node %s: %v", nd.Name, err)
	}
}

func checkLinkInvariants(l *Link, nodes map[string]bool, used map[Endpoint]bool, bad func(string, ...any)) {
	if l.Name == "" || (!nameRE.MatchString(l.Name) && l.Name != DerivedLinkName(l.Endpoints)) {
		bad("link name %q neither valid nor derived", l.Name)
	}
	k, ok := linkKinds.lookup(l.Connector)
	if len(l.Endpoints) < 2 || !ok || !k.accepts(len(l.Endpoints)) {
		bad("link %s: %d endpoints on connector %q", l.Name, len(l.Endpoints), l.Connector)
	}
	for _, e := range l.Endpoints {
		k := Endpoint{Node: e.Node, Ifname: e.Ifname}
		if !nodes[e.Node] || checkIfname(e.Ifname) != nil || used[k] {
			bad("link %s: endpoint %s on no node, invalid or used twice", l.Name, k)
		}
		used[k] = true
	}
	if l.MTU != 0 && (l.MTU < minMTU || l.MTU > maxMTU) {
		bad("link %s: mtu %d", l.Name, l.MTU)
	}
	if rate, err := ParseRate(l.RateText); (l.RateText != "" || l.Rate != 0) && (err != nil || rate != l.Rate) {
		bad("link %s: rate %d from %q", l.Name, l.Rate, l.RateText)
	}
	if l.State != StateUp && l.State != StateDown {
		bad("link %s: state %q", l.Name, l.State)
	}
	if err := impairInvariants(l.Impair); err != nil {
		bad("link %s: %v", l.Name, err)
	}
	for key, im := range l.From {
		if !slices.ContainsFunc(l.Endpoints, func(e Endpoint) bool { return e.String() == key }) {
			bad("link %s: from %q, not an endpoint", l.Name, key)
		}
		if err := impairInvariants(im); err != nil {
			bad("link %s: from %s: %v", l.Name, key, err)
		}
	}
}

func impairInvariants(im Impairment) error {
	for _, pc := range []float64{im.Loss, im.LossCorrelation, im.Duplicate, im.Corrupt} {
		if !(pc >= 0 && pc <= 100) { // also false for NaN
			return fmt.Errorf("percentage %v", pc)
		}
	}
	switch {
	case im.Delay < 0 || im.Delay > MaxDelay || im.Jitter < 0 || im.Jitter > MaxDelay:
		return fmt.Errorf("delay %v jitter %v", im.Delay, im.Jitter)
	case im.Jitter > 0 && im.Delay == 0:
		return fmt.Errorf("jitter without delay")
	case (im.Jitter > 0) != (im.Distribution != ""):
		return fmt.Errorf("distribution %q with jitter %v", im.Distribution, im.Jitter)
	case im.Distribution != "" && !contains(Distributions, im.Distribution):
		return fmt.Errorf("distribution %q", im.Distribution)
	}
	return nil
}
