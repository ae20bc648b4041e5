package clab

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// link is a point-to-point link between two linux nodes.
type link struct {
	eps    [2]endpoint
	mtu    *val
	labels []pair // metadata: no meaning in trellis; the converted file shows them as a comment
	o      origin
}

// endpoint is one end of a link, with the addresses the link gives it.
type endpoint struct {
	node, iface string
	addrs       []val
	o           origin
}

// linkReason is why a key of a link or endpoint is refused.
var linkReason = map[string]reason{
	"vars": {"containerlab hands them to vendor kinds' configuration templates; trellis has none", "remove them"},
	"mac":  {"trellis derives an interface's MAC address from the network, node and interface names, the same at every start", "remove it"},
}

// links reads `topology.links`, making point-to-point links and the members of the LANs.
func (r *reader) links(l *lab, n *yaml.Node, kinds map[string]string) {
	if n.Kind != yaml.SequenceNode {
		r.fail(n, "topology.links", "expected a list of links", `write each as - endpoints: ["r1:eth1", "r2:eth1"]`)
		return
	}
	for i, item := range n.Content {
		field := fmt.Sprintf("topology.links[%d]", i)
		lk, ok := r.link(item, field)
		if ok {
			r.place(l, lk, kinds)
		}
	}
	for _, ln := range l.lans {
		if len(ln.members) < 2 {
			r.fail(&yaml.Node{Line: ln.o.line}, ln.o.field, fmt.Sprintf("bridge %s joins %d nodes: a trellis LAN joins two or more", ln.name, len(ln.members)),
				"link at least two nodes to it, or remove it")
		}
	}
}

// link reads one item of `links:`, in the brief form (endpoints as "node:interface" strings)
// or as `type: veth` (endpoints as mappings).
func (r *reader) link(item *yaml.Node, field string) (*link, bool) {
	es, ok := r.mappingOf(item, field, "a link: a mapping with endpoints")
	if !ok {
		return nil, false
	}
	lk := &link{o: origin{item.Line, field}}
	keys := map[string]*yaml.Node{}
	for _, e := range es {
		keys[e.key.Value] = e.val
	}
	veth := false
	if t := keys["type"]; t != nil {
		switch typ := strings.ToLower(strings.TrimSpace(t.Value)); {
		case typ == "veth":
			veth = true
		case refusedLinkTypes[typ].msg != "":
			r.fail(t, field+".type", fmt.Sprintf("trellis cannot honour link type %s: %s", typ, refusedLinkTypes[typ].msg), refusedLinkTypes[typ].fix)
			return nil, false
		default:
			r.fail(t, field+".type", fmt.Sprintf("%q is not a containerlab link type", t.Value), "write type: veth, or leave type out")
			return nil, false
		}
	}
	ok = true
	for _, e := range es {
		fld := field + "." + e.key.Value
		switch key := e.key.Value; {
		case key == "type" || key == "endpoints":
		case key == "mtu":
			lk.mtu, _ = ptr(r.str(e.val, fld))
		case key == "labels":
			lk.labels = r.pairs(e.val, fld)
		case (key == "ipv4" || key == "ipv6") && !veth:
		case linkReason[key].msg != "":
			r.fail(e.key, fld, "trellis cannot honour it: "+linkReason[key].msg, linkReason[key].fix)
			ok = false
		default:
			r.fail(e.key, fld, "not a key of a containerlab link", "the keys trellis honours are type, endpoints, mtu, labels, and ipv4 and ipv6 in the brief form")
			ok = false
		}
	}
	eps := keys["endpoints"]
	if eps == nil {
		r.fail(item, field+".endpoints", "missing", `give the two ends, e.g. endpoints: ["r1:eth1", "r2:eth1"]`)
		return nil, false
	}
	if eps.Kind != yaml.SequenceNode || len(eps.Content) != 2 {
		r.fail(eps, field+".endpoints", "expected a list of two endpoints", `give the two ends, e.g. endpoints: ["r1:eth1", "r2:eth1"]`)
		return nil, false
	}
	for i, ep := range eps.Content {
		fld := fmt.Sprintf("%s.endpoints[%d]", field, i)
		var good bool
		if veth {
			lk.eps[i], good = r.vethEndpoint(ep, fld)
		} else {
			lk.eps[i], good = r.briefEndpoint(ep, fld)
		}
		ok = ok && good
	}
	if !veth {
		for _, fam := range []string{"ipv4", "ipv6"} {
			if v := keys[fam]; v != nil {
				ok = r.briefAddrs(lk, v, field+"."+fam) && ok
			}
		}
	}
	return lk, ok
}

func ptr(v val, ok bool) (*val, bool) {
	if !ok {
		return nil, false
	}
	return &v, true
}

// briefEndpoint reads "node:interface".
func (r *reader) briefEndpoint(ep *yaml.Node, field string) (endpoint, bool) {
	v, ok := r.str(ep, field)
	if !ok {
		return endpoint{}, false
	}
	node, iface, found := strings.Cut(v.s, ":")
	if !found {
		r.fail(ep, field, fmt.Sprintf("%q is not NODE:INTERFACE", v.s), `write e.g. "r1:eth1"`)
		return endpoint{}, false
	}
	return endpoint{node: node, iface: iface, o: v.o}, true
}

// vethEndpoint reads {node: N, interface: I, ipv4: A, ipv6: A}.
func (r *reader) vethEndpoint(ep *yaml.Node, field string) (endpoint, bool) {
	es, ok := r.mappingOf(ep, field, "an endpoint: a mapping with node and interface")
	if !ok {
		return endpoint{}, false
	}
	e := endpoint{o: origin{ep.Line, field}}
	for _, kv := range es {
		fld := field + "." + kv.key.Value
		switch key := kv.key.Value; {
		case key == "node" || key == "interface":
			v, good := r.str(kv.val, fld)
			ok = ok && good
			if key == "node" {
				e.node = v.s
			} else {
				e.iface = v.s
			}
		case key == "ipv4" || key == "ipv6":
			if v, good := r.str(kv.val, fld); good && v.s != "" {
				e.addrs = append(e.addrs, v)
			}
		case linkReason[key].msg != "":
			r.fail(kv.key, fld, "trellis cannot honour it: "+linkReason[key].msg, linkReason[key].fix)
			ok = false
		default:
			r.fail(kv.key, fld, "not a key of a containerlab endpoint", "the keys trellis honours are node, interface, ipv4 and ipv6")
			ok = false
		}
	}
	if e.node == "" || e.iface == "" {
		r.fail(ep, field, "an endpoint needs both node and interface", "write e.g. {node: r1, interface: eth1}")
		ok = false
	}
	return e, ok
}

// briefAddrs gives the brief form's `ipv4: [A, B]` (or ipv6) to the endpoints in order.
func (r *reader) briefAddrs(lk *link, v *yaml.Node, field string) bool {
	addrs := r.strs(v, field)
	if len(addrs) > 2 {
		r.fail(v, field, fmt.Sprintf("%d addresses for 2 endpoints", len(addrs)), "give one per endpoint, in the order of endpoints")
		return false
	}
	for i, a := range addrs {
		if strings.TrimSpace(a.s) != "" { // "" gives that endpoint none, as in containerlab
			a.s = strings.TrimSpace(a.s)
			lk.eps[i].addrs = append(lk.eps[i].addrs, a)
		}
	}
	return true
}

// place makes a read link a point-to-point link, or a member of a bridge's LAN.
func (r *reader) place(l *lab, lk *link, kinds map[string]string) {
	bridge := -1
	for i, ep := range lk.eps {
		if why, special := specialEndpoints[ep.node]; special && kinds[ep.node] == "" {
			r.fail(&yaml.Node{Line: ep.o.line}, ep.o.field, "trellis cannot honour it: "+why.msg, why.fix)
			return
		}
		if k := kinds[ep.node]; k == kindBridge || k == kindOVS {
			if bridge >= 0 {
				r.fail(&yaml.Node{Line: lk.o.line}, lk.o.field, "a link between two bridges: in trellis a bridge is a LAN, and two LANs cannot be joined",
					"make them one bridge")
				return
			}
			bridge = i
		}
	}
	if bridge < 0 {
		for _, ep := range lk.eps {
			l.addAddrs(ep)
		}
		l.links = append(l.links, lk)
		return
	}
	at := &yaml.Node{Line: lk.o.line}
	switch {
	case lk.mtu != nil:
		r.fail(at, lk.o.field+".mtu", "a link to a bridge is one member of a trellis LAN, which has one MTU for all", "remove it")
	case len(lk.eps[bridge].addrs) > 0:
		r.fail(at, lk.o.field, "an address for the bridge's end: a trellis LAN has no interface of its own", "remove it")
	default:
		member := lk.eps[1-bridge]
		l.addAddrs(member)
		for _, ln := range l.lans {
			if ln.name == lk.eps[bridge].node {
				ln.members = append(ln.members, member)
			}
		}
	}
}

// specialEndpoints are containerlab's endpoint names of other link types in the brief form.
var specialEndpoints = map[string]reason{
	"host":     refusedLinkTypes["host"],
	"mgmt-net": refusedLinkTypes["mgmt-net"],
	"macvlan":  refusedLinkTypes["macvlan"],
}

// addAddrs gives an endpoint's addresses to its node's interface.
func (l *lab) addAddrs(ep endpoint) {
	if len(ep.addrs) == 0 {
		return
	}
	for _, n := range l.nodes {
		if n.name == ep.node {
			if _, ok := n.addrs[ep.iface]; !ok {
				n.ifnames = append(n.ifnames, ep.iface)
			}
			n.addrs[ep.iface] = append(n.addrs[ep.iface], ep.addrs...)
		}
	}
}
