package clab

import (
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// lab is what trellis makes of a containerlab file.
type lab struct {
	name  val
	dir   string // the containerlab file's directory: binds are resolved beside it
	nodes []*node
	links []*link // point-to-point links, in file order
	lans  []*lan  // one per bridge node, in file order
}

// node is a kind linux node, its settings merged from its definitions.
type node struct {
	name                   string
	o                      origin
	image, cmd, entrypoint *val
	cpu, memory, cpuset    *val
	exec                   []val
	files                  []file
	env, sysctls           []pair
	addrs                  map[string][]val // interface -> addresses, from links
	ifnames                []string         // keys of addrs in the order met
}

// lan is a bridge node: a trellis LAN of the endpoints linked to it.
type lan struct {
	name    string
	o       origin
	members []endpoint
}

// topologyKeys are the keys under `topology:`.
var topologyKeys = []string{"defaults", "kinds", "groups", "nodes", "links"}

// topology reads `topology:`: the definitions, then the nodes with what they inherit, then the
// links.
func (r *reader) topology(l *lab, n *yaml.Node) {
	l.dir = filepath.Dir(r.file)
	es, ok := r.mappingOf(n, "topology", "a mapping with nodes and links")
	if !ok {
		return
	}
	t := &defs{kinds: map[string]*def{}, groups: map[string]*def{}}
	var nodes, links *yaml.Node
	for _, e := range es {
		switch e.key.Value {
		case "defaults":
			t.defaults = r.definition(e.val, "topology.defaults")
		case "kinds":
			r.named(e.val, "topology.kinds", t.kinds)
		case "groups":
			r.named(e.val, "topology.groups", t.groups)
		case "nodes":
			nodes = e.val
		case "links":
			links = e.val
		default:
			r.fail(e.key, "topology."+e.key.Value, "not a containerlab topology key", "the keys here are "+strings.Join(topologyKeys, ", "))
		}
	}
	if nodes == nil {
		r.fail(n, "topology.nodes", "missing", "list the lab's nodes under `nodes:`")
		return
	}
	es, _ = r.mappingOf(nodes, "topology.nodes", "a mapping from node name to node")
	kinds := map[string]string{} // node name -> kind
	for _, e := range es {
		field := "topology.nodes." + e.key.Value
		d := r.definition(e.val, field)
		d.line = e.key.Line
		switch kind := r.resolve(t, d, e.key.Value); kind {
		case kindLinux:
			kinds[e.key.Value] = kind
			l.nodes = append(l.nodes, r.node(t, d, e.key.Value, l.dir))
		case kindBridge, kindOVS:
			kinds[e.key.Value] = kind
			r.bridgeKeys(d)
			l.lans = append(l.lans, &lan{name: e.key.Value, o: origin{e.key.Line, field}})
		}
	}
	if links != nil {
		r.links(l, links, kinds)
	}
}

// named reads the definitions of `kinds:` or `groups:` by name.
func (r *reader) named(n *yaml.Node, field string, into map[string]*def) {
	es, _ := r.mappingOf(n, field, "a mapping from name to node settings")
	for _, e := range es {
		d := r.definition(e.val, field+"."+e.key.Value)
		d.line = e.key.Line
		into[e.key.Value] = d
	}
}

// defs are the definitions nodes inherit from.
type defs struct {
	defaults      *def
	kinds, groups map[string]*def
	// of the node being resolved, from most to least specific: node, group, kind, defaults
	chain [4]*def
}

// resolve finds a node's kind and group as containerlab does (kind: the node's, its group's,
// the default group's, the defaults'; group: the node's, its kind's, the defaults') and sets
// t.chain to the node's definitions. It returns the kind, or "" after reporting a problem.
func (r *reader) resolve(t *defs, nd *def, name string) string {
	lookup := func(v *yaml.Node) *def {
		if v == nil {
			return nil
		}
		return t.groups[v.Value]
	}
	kindNode := nd.get("kind")
	if kindNode == nil {
		kindNode = lookup(nd.get("group")).get("kind")
	}
	if kindNode == nil {
		kindNode = lookup(t.defaults.get("group")).get("kind")
	}
	if kindNode == nil {
		kindNode = t.defaults.get("kind")
	}
	if kindNode == nil {
		r.fail(&yaml.Node{Line: nd.line}, nd.field+".kind", "missing", "give the node `kind: linux` (or its group, or the defaults)")
		return ""
	}
	kind := kindNode.Value
	gv := nd.get("group")
	if gv == nil {
		if gv = t.kinds[kind].get("group"); gv == nil {
			gv = t.defaults.get("group")
		}
	}
	g := lookup(gv)
	if gv != nil && g == nil {
		r.fail(gv, nd.field+".group", fmt.Sprintf("no group %q under topology.groups", gv.Value), "define the group, or correct its name")
	}
	t.chain = [4]*def{nd, g, t.kinds[kind], t.defaults}
	switch kind {
	case kindLinux, kindBridge, kindOVS:
		return kind
	}
	r.fail(kindNode, nd.field+".kind", fmt.Sprintf("trellis cannot run kind %q: a trellis node is a Linux container (kind linux), and a bridge a LAN", kind),
		"use kind linux with an image that holds the software, or kind bridge")
	return ""
}

// bridgeKeys refuses a bridge node's own settings: a LAN runs nothing (what it inherits from
// the defaults, its kind or group is for other nodes).
func (r *reader) bridgeKeys(d *def) {
	for key, v := range d.keys {
		if key != "kind" && key != "group" && key != "labels" {
			r.fail(v, d.field+"."+key, "a bridge is a LAN in trellis and runs nothing", "remove it")
		}
	}
}
