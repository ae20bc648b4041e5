package clab

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trellisnet/trellis/internal/spec"
	"gopkg.in/yaml.v3"
)

// reader reads a containerlab file's YAML tree, collecting every problem.
type reader struct {
	file string
	errs []*spec.Error
}

func (r *reader) fail(at *yaml.Node, field, msg, fix string) {
	r.errs = append(r.errs, &spec.Error{File: r.file, Line: at.Line, Field: field, Msg: msg, Fix: fix})
}

// sortErrors orders problems by line, each once (a problem of an inherited key is found once
// per node that inherits it).
func sortErrors(es []*spec.Error) spec.Errors {
	slices.SortStableFunc(es, func(a, b *spec.Error) int { return a.Line - b.Line })
	var out spec.Errors
	seen := map[string]bool{}
	for _, e := range es {
		if !seen[e.Error()] {
			seen[e.Error()] = true
			out = append(out, e)
		}
	}
	return out
}

// val is a single value of the containerlab file, with where it is.
type val struct {
	s string
	o origin
}

// pair is one entry of a mapping of strings (env, sysctls, labels).
type pair struct {
	key    string
	val    val
	parent string // the mapping's key, e.g. topology.nodes.r1.env
}

// entry is one key of a mapping, in file order.
type entry struct {
	key, val *yaml.Node
}

// mappingOf returns a mapping's entries in file order, reporting a value that is not a mapping
// and keys given twice.
func (r *reader) mappingOf(n *yaml.Node, field, want string) ([]entry, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		r.fail(n, field, "expected "+want, "see docs/containerlab.md")
		return nil, false
	}
	var out []entry
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if seen[k.Value] {
			r.fail(k, field+"."+k.Value, "key given twice", "keep only one")
			continue
		}
		seen[k.Value] = true
		out = append(out, entry{k, n.Content[i+1]})
	}
	return out, true
}

// str reads a single value.
func (r *reader) str(n *yaml.Node, field string) (val, bool) {
	if n.Kind != yaml.ScalarNode {
		r.fail(n, field, "expected a single value", "write it on one line after the colon")
		return val{}, false
	}
	if strings.Contains(n.Value, "{{") || strings.Contains(n.Value, "${") {
		r.fail(n, field, fmt.Sprintf("%q is a template or an environment variable, which containerlab expands and trellis does not", n.Value),
			"render the file first (containerlab deploy --export-rendered FILE), or write the value itself")
		return val{}, false
	}
	return val{n.Value, origin{n.Line, field}}, true
}

// strs reads a list of single values.
func (r *reader) strs(n *yaml.Node, field string) []val {
	if n.Kind != yaml.SequenceNode {
		r.fail(n, field, "expected a list", "write `[a, b]` or one `- item` per line")
		return nil
	}
	var out []val
	for i, c := range n.Content {
		if v, ok := r.str(c, fmt.Sprintf("%s[%d]", field, i)); ok {
			out = append(out, v)
		}
	}
	return out
}

// pairs reads a mapping of single values (env, labels, sysctls).
func (r *reader) pairs(n *yaml.Node, field string) []pair {
	es, _ := r.mappingOf(n, field, "a mapping of names to values")
	var out []pair
	for _, e := range es {
		if v, ok := r.str(e.val, field+"."+e.key.Value); ok {
			out = append(out, pair{e.key.Value, v, field})
		}
	}
	return out
}

// def is one node definition of the file: a node, or the defaults, a kind's or a group's,
// which nodes inherit from (node > group > kind > defaults, as containerlab does).
type def struct {
	field string
	line  int
	keys  map[string]*yaml.Node // the keys trellis honours, by name
}

// get returns the value of a key, or nil (also for a nil def).
func (d *def) get(key string) *yaml.Node {
	if d == nil {
		return nil
	}
	return d.keys[key]
}

// definition reads a node definition, refusing the keys trellis cannot honour.
func (r *reader) definition(n *yaml.Node, field string) *def {
	d := &def{field: field, line: n.Line, keys: map[string]*yaml.Node{}}
	es, _ := r.mappingOf(n, field, "a mapping of node settings")
	for _, e := range es {
		key, fld := e.key.Value, field+"."+e.key.Value
		if why, refused := refusedNodeKeys[key]; refused {
			r.fail(e.key, fld, "trellis cannot honour it: "+why.msg, why.fix)
			continue
		}
		if !slices.Contains(nodeKeys, key) {
			r.fail(e.key, fld, "not a containerlab node key", fmt.Sprintf("the keys trellis honours here are %s", strings.Join(nodeKeys, ", ")))
			continue
		}
		d.keys[key] = e.val
	}
	r.checkPullPolicy(d)
	return d
}

// checkPullPolicy accepts `image-pull-policy: IfNotPresent`, what trellis does: an image is
// pulled when its cache does not have it.
func (r *reader) checkPullPolicy(d *def) {
	v := d.keys["image-pull-policy"]
	if v != nil && !strings.EqualFold(v.Value, "IfNotPresent") {
		r.fail(v, d.field+".image-pull-policy", fmt.Sprintf("trellis cannot honour %q: it pulls an image only when its cache does not have it (IfNotPresent)", v.Value),
			"remove it; `trellis image rm` removes a cached image so that the next up pulls it again")
	}
}

// lab reads the file: its top level, and its topology.
func (r *reader) lab(doc *yaml.Node) *lab {
	l := &lab{}
	if len(doc.Content) == 0 {
		r.errs = append(r.errs, &spec.Error{File: r.file, Field: "(file)", Msg: "the file is empty", Fix: "write a lab with name and topology"})
		return l
	}
	root := doc.Content[0]
	es, ok := r.mappingOf(root, "(file)", "a mapping with the keys name and topology")
	if !ok {
		return l
	}
	var topo *yaml.Node
	for _, e := range es {
		switch key := e.key.Value; key {
		case "name":
			l.name, _ = r.str(e.val, "name")
		case "topology":
			topo = e.val
		default:
			if why, ok := refusedTopKeys[key]; ok {
				r.fail(e.key, key, "trellis cannot honour it: "+why.msg, why.fix)
			} else {
				r.fail(e.key, key, "not a containerlab key", "the keys trellis honours at the top are name and topology")
			}
		}
	}
	if l.name.o.line == 0 {
		r.fail(root, "name", "missing", "give the lab a name, e.g. `name: lab1`")
	}
	if topo == nil {
		r.fail(root, "topology", "missing", "write the lab's nodes and links under `topology:`")
		return l
	}
	r.topology(l, topo)
	return l
}
