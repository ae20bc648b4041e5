package clab

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// node merges a linux node's settings from t.chain as containerlab does: a single value from
// the most specific definition that gives it; exec and binds from all of them, least specific
// first (a bind of the same destination replaced by the more specific one); env, labels and
// sysctls key by key, the more specific winning.
func (r *reader) node(t *defs, d *def, name, dir string) *node {
	n := &node{name: name, o: origin{d.line, d.field}, addrs: map[string][]val{}}
	n.image = r.single(t, "image")
	n.cmd = r.single(t, "cmd")
	n.entrypoint = r.single(t, "entrypoint")
	n.cpu = r.single(t, "cpu")
	n.memory = r.single(t, "memory")
	n.cpuset = r.single(t, "cpu-set")
	if h := r.single(t, "hostname"); h != nil && h.s != name {
		r.fail(&yaml.Node{Line: h.o.line}, h.o.field, fmt.Sprintf("a trellis node's hostname is its name, %q", name),
			"remove it, or rename the node")
	}
	for _, v := range r.merged(t, "exec") {
		if !slices.ContainsFunc(n.exec, func(x val) bool { return x.s == v.s }) { // as containerlab, once each
			n.exec = append(n.exec, v)
		}
	}
	n.files = r.binds(r.merged(t, "binds"), name, dir)
	n.env = r.mergedPairs(t, "env")
	for _, l := range r.mergedPairs(t, "labels") { // containerlab gives labels to the node's env too
		n.env = setPair(n.env, pair{"CLAB_LABEL_" + envKey(l.key), l.val, l.parent})
	}
	slices.SortFunc(n.env, func(a, b pair) int { return strings.Compare(a.key, b.key) })
	n.sysctls = r.mergedPairs(t, "sysctls")
	return n
}

// single returns a key's value from the most specific definition that has it.
func (r *reader) single(t *defs, key string) *val {
	for _, d := range t.chain {
		if v := d.get(key); v != nil {
			if s, ok := r.str(v, d.field+"."+key); ok {
				return &s
			}
			return nil
		}
	}
	return nil
}

// merged returns a list key's items from every definition, least specific first.
func (r *reader) merged(t *defs, key string) []val {
	var out []val
	for i := len(t.chain) - 1; i >= 0; i-- {
		if v := t.chain[i].get(key); v != nil {
			out = append(out, r.strs(v, t.chain[i].field+"."+key)...)
		}
	}
	return out
}

// mergedPairs returns a mapping key's entries from every definition, the more specific
// replacing the less specific, sorted by name.
func (r *reader) mergedPairs(t *defs, key string) []pair {
	var out []pair
	for i := len(t.chain) - 1; i >= 0; i-- {
		if v := t.chain[i].get(key); v != nil {
			for _, p := range r.pairs(v, t.chain[i].field+"."+key) {
				out = setPair(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b pair) int { return strings.Compare(a.key, b.key) })
	return out
}

// setPair sets a key in a list of pairs, replacing its value if it is there.
func setPair(ps []pair, p pair) []pair {
	for i := range ps {
		if ps[i].key == p.key {
			ps[i] = p
			return ps
		}
	}
	return append(ps, p)
}

var (
	envSpecialRE = regexp.MustCompile(`[-+./]`)
	envBadRE     = regexp.MustCompile(`[^a-zA-Z0-9_]+`)
)

// envKey makes a label's name into an environment variable's as containerlab does: -+./
// become _, other characters that an environment variable's name cannot have go, upper case.
func envKey(s string) string {
	return strings.ToUpper(envBadRE.ReplaceAllString(envSpecialRE.ReplaceAllString(s, "_"), ""))
}
