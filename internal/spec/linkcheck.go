package spec

import (
	"fmt"
	"slices"
	"strings"
)

// validateLink checks one link against the rest of the file: its name, endpoints, connector
// and per-direction impairments. used collects the interfaces links take.
func (p *parser) validateLink(n *Network, l *Link, used map[Endpoint]int) {
	if l.named && (l.Name == "" || !nameRE.MatchString(l.Name)) {
		p.add(n.LinkError(l, "name", fmt.Sprintf("%q is not a valid name", l.Name),
			"use letters, digits, '-' and '_', or leave the name out to have one derived from the endpoints"))
	}
	if !l.incomplete && len(l.Endpoints) < 2 {
		p.add(n.LinkError(l, "endpoints", "a link needs at least two endpoints", "list two endpoints for a point-to-point link, more for a LAN"))
	}
	for j, e := range l.Endpoints {
		ef := fmt.Sprintf("links[%d].endpoints[%d]", l.index, j)
		if !p.nodesBad && n.Node(e.Node) == nil {
			p.add(&Error{n.File, e.Line, ef, fmt.Sprintf("no node named %q", e.Node), "declare it under nodes, or correct the name"})
		}
		if err := checkIfname(e.Ifname); err != nil {
			p.add(&Error{n.File, e.Line, ef, err.Error(), "use a name of 1 to 15 letters, digits, '-', '_' or '.', such as eth1"})
		}
		k := Endpoint{Node: e.Node, Ifname: e.Ifname} // without Line, which differs from use to use
		if prev, dup := used[k]; dup {
			p.add(&Error{n.File, e.Line, ef, fmt.Sprintf("interface %s is already used by links[%d]", k, prev), "give this endpoint another interface name"})
			continue
		}
		used[k] = l.index
	}
	p.impairments(n, l)
	if l.incomplete || len(l.Endpoints) < 2 {
		return
	}
	p.connector(n, l)
	for _, key := range sortedKeys(l.From) {
		if !slices.ContainsFunc(l.Endpoints, func(e Endpoint) bool { return e.String() == key }) {
			p.add(n.LinkError(l, "from."+key, "not an endpoint of this link", useOneOf(endpointStrings(l.Endpoints))))
		}
	}
}

// connector fills in the default connector and checks the link against its kind.
func (p *parser) connector(n *Network, l *Link) {
	switch l.Connector {
	case "", AutoConnector:
		// A point-to-point link: the plan may join it with one veth pair while it has nothing
		// to enforce (decision 5); it has the default connector's ports when it has.
		l.Connector, l.DefaultConnector = DefaultP2PConnector, true
		if len(l.Endpoints) > 2 {
			l.Connector, l.DefaultConnector = DefaultLANConnector, false
		}
	}
	k, ok := linkKinds.lookup(l.Connector)
	if !ok {
		p.add(n.LinkError(l, "connector", fmt.Sprintf("unknown connector %q", l.Connector), useOneOf(append([]string{AutoConnector}, LinkKinds()...))))
		return
	}
	if !k.accepts(len(l.Endpoints)) {
		var fits []string
		for _, name := range LinkKinds() {
			if other, _ := linkKinds.lookup(name); other.accepts(len(l.Endpoints)) {
				fits = append(fits, "`connector: "+name+"`")
			}
		}
		fix := "use " + strings.Join(fits, " or ")
		if len(fits) == 0 {
			fix = "no connector joins that many: split the link"
		}
		p.add(n.LinkError(l, "connector", fmt.Sprintf("a %s joins %s endpoints, not %d", l.Connector, k.bounds(), len(l.Endpoints)), fix))
		return
	}
	p.validateLinkSettings(n, l)
	if k.Check != nil {
		p.add(k.Check(n, l)...)
	}
}

// impairments checks the link-level impairment as a whole, and each direction's merged one;
// a direction's problem is reported at a key given in that direction (the link-level problems
// are reported once, at the link level).
func (p *parser) impairments(n *Network, l *Link) {
	if key, msg := checkImpair(l.Impair); key != "" {
		p.add(n.LinkError(l, key, msg, impairFixes[key]))
	}
	for _, ep := range sortedKeys(l.From) {
		key, msg := checkImpair(l.From[ep])
		if key == "" {
			continue
		}
		given, fix := l.fromGiven[ep], impairFixes[key]
		switch {
		case given[key]:
		case key == "jitter" && given["delay"]:
			key, msg, fix = "delay", "a zero delay here leaves the link's jitter without a delay", "give a delay above 0, or add `jitter: 0s` here too"
		case key == "distribution" && given["jitter"]:
			key, msg, fix = "jitter", "a zero jitter here leaves the link's distribution without jitter", "give a jitter above 0, or remove the link's distribution"
		default:
			continue // the link-level fields are at fault, and reported above
		}
		p.add(n.LinkError(l, "from."+ep+"."+key, msg, fix))
	}
}

func endpointStrings(eps []Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.String()
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
