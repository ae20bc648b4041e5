package cluster

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// DiffSpecs lists what changes from network old (nil: none yet) to network new, object by
// object, in the words of `trellis diff`: "+ node r5", "- link r2-r3", "! node r3 (restarts):
// its own settings changed", "~ link ab: rate 10mbit -> 50mbit". In a cluster each agent applies
// its machine's part of it; the placer may also move nodes (not listed here).
func DiffSpecs(old, new *spec.Network) []string {
	var out []string
	if old == nil {
		old = &spec.Network{}
	}
	for _, nd := range new.Nodes {
		o := old.Node(nd.Name)
		switch {
		case o == nil:
			out = append(out, "+ node "+nd.Name)
		case plan.Digest(o) != plan.Digest(nd):
			out = append(out, fmt.Sprintf("! node %s (restarts): kind, loopback addresses, sysctl, files or exec changed", nd.Name))
		case o.Host != nd.Host:
			out = append(out, fmt.Sprintf("! node %s (moves): host %q -> %q", nd.Name, o.Host, nd.Host))
		case !reflect.DeepEqual(o.Addresses, nd.Addresses):
			out = append(out, fmt.Sprintf("~ node %s: interface addresses", nd.Name))
		}
	}
	for _, o := range old.Nodes {
		if new.Node(o.Name) == nil {
			out = append(out, "- node "+o.Name)
		}
	}
	links := func(n *spec.Network) map[string]*spec.Link {
		m := map[string]*spec.Link{}
		for _, l := range n.Links {
			m[l.Name] = l
		}
		return m
	}
	ol, nl := links(old), links(new)
	for _, l := range new.Links {
		o := ol[l.Name]
		if o == nil {
			out = append(out, "+ link "+l.Name)
			continue
		}
		if d := linkDiff(o, l); d != "" {
			out = append(out, "~ link "+l.Name+": "+d)
		}
	}
	for _, o := range old.Links {
		if nl[o.Name] == nil {
			out = append(out, "- link "+o.Name)
		}
	}
	switch {
	case old.Tunnel != "" && old.Tunnel != new.Tunnel:
		out = append(out, fmt.Sprintf("~ tunnel %s -> %s", old.Tunnel, new.Tunnel))
	case old.Tunnel != "":
		if d := spec.SettingsChanges(old.TunnelKindSettings(), new.TunnelKindSettings()); len(d) > 0 {
			out = append(out, fmt.Sprintf("~ tunnel %s: %s", new.Tunnel, strings.Join(d, "; ")))
		}
	}
	return out
}

func linkDiff(o, l *spec.Link) string {
	var d []string
	if o.Rate != l.Rate {
		d = append(d, fmt.Sprintf("rate %s -> %s", orNone(o.RateText), orNone(l.RateText)))
	}
	if o.MTU != l.MTU {
		d = append(d, fmt.Sprintf("mtu %d -> %d", o.MTU, l.MTU))
	}
	if o.State != l.State {
		d = append(d, fmt.Sprintf("state %s -> %s", o.State, l.State))
	}
	if o.Connector != l.Connector {
		d = append(d, fmt.Sprintf("connector %s -> %s", o.Connector, l.Connector))
	}
	eps := func(l *spec.Link) []string {
		var s []string
		for _, e := range l.Endpoints {
			s = append(s, e.String())
		}
		slices.Sort(s)
		return s
	}
	if !slices.Equal(eps(o), eps(l)) {
		d = append(d, fmt.Sprintf("endpoints %s -> %s", strings.Join(eps(o), ","), strings.Join(eps(l), ",")))
	}
	if o.Impair != l.Impair || !reflect.DeepEqual(o.From, l.From) {
		d = append(d, "impairments")
	}
	if o.Connector == l.Connector {
		d = append(d, spec.SettingsChanges(o.KindSettings(), l.KindSettings())...)
	}
	return strings.Join(d, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
