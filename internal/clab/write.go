package clab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// writer writes the trellis file, noting for each line where in the containerlab file it
// comes from.
type writer struct {
	buf    bytes.Buffer
	origin []origin // by line, from 1
}

// line writes one line (indented by depth levels of two spaces) that comes from o.
func (w *writer) line(o origin, depth int, format string, args ...any) {
	if w.origin == nil {
		w.origin = []origin{o} // origin[0]: for problems without a line
	}
	w.buf.WriteString(strings.Repeat("  ", depth))
	fmt.Fprintf(&w.buf, format, args...)
	w.buf.WriteByte('\n')
	w.origin = append(w.origin, o)
}

// network writes the lab as a trellis topology file.
func (w *writer) network(file string, l *lab) {
	top := origin{1, "name"}
	if l.name.o.line != 0 {
		top = l.name.o
	}
	w.line(top, 0, "# trellis topology converted from containerlab's %s (trellis convert);", filepath.Base(file))
	w.line(top, 0, "# the files' source paths are relative to its directory.")
	w.line(top, 0, "name: %s", q(l.name.s))
	w.line(top, 0, "nodes:")
	for _, n := range l.nodes {
		w.node(n)
	}
	if len(l.links)+len(l.lans) == 0 {
		return
	}
	w.line(top, 0, "links:")
	for _, lk := range l.links {
		w.line(lk.o, 1, "- endpoints:")
		for _, ep := range lk.eps {
			w.line(ep.o, 3, "- %s", q(ep.node+":"+ep.iface))
		}
		if lk.mtu != nil {
			w.line(lk.mtu.o, 2, "mtu: %s", q(lk.mtu.s))
		}
		for _, p := range lk.labels {
			w.line(p.val.o, 2, "# label %s: %s (containerlab metadata, no meaning in trellis)", p.key, p.val.s)
		}
	}
	for _, ln := range l.lans {
		w.line(ln.o, 1, "- name: %s", q(ln.name))
		w.line(ln.o, 2, "endpoints:")
		for _, ep := range ln.members {
			w.line(ep.o, 3, "- %s", q(ep.node+":"+ep.iface))
		}
	}
}

// node writes one node; the keys a node has before trellis knows them (image, env, cmd,
// entrypoint) are written as trellis will name them.
func (w *writer) node(n *node) {
	empty := n.image == nil && n.cmd == nil && n.entrypoint == nil && n.cpu == nil && n.memory == nil && n.cpuset == nil &&
		len(n.env) == 0 && len(n.sysctls) == 0 && len(n.addrs) == 0 && len(n.files) == 0 && len(n.exec) == 0
	if empty {
		w.line(n.o, 1, "%s: {}", q(n.name))
		return
	}
	w.line(n.o, 1, "%s:", q(n.name))
	for _, s := range []struct {
		key string
		v   *val
	}{{"image", n.image}, {"entrypoint", n.entrypoint}, {"cmd", n.cmd}, {"cpu", n.cpu}, {"memory", n.memory}, {"cpuset", n.cpuset}} {
		if s.v != nil && s.v.s != "" { // containerlab takes an empty cmd or entrypoint as none
			w.line(s.v.o, 2, "%s: %s", s.key, q(s.v.s))
		}
	}
	w.pairs("env", n.env)
	w.pairs("sysctl", n.sysctls)
	if len(n.ifnames) > 0 {
		w.line(n.addrs[n.ifnames[0]][0].o, 2, "addresses:")
		for _, ifname := range n.ifnames {
			w.line(n.addrs[ifname][0].o, 3, "%s:", q(ifname))
			for _, a := range n.addrs[ifname] {
				w.line(a.o, 4, "- %s", q(a.s))
			}
		}
	}
	if len(n.files) > 0 {
		w.line(n.files[0].o, 2, "files:")
		for _, f := range n.files {
			w.line(f.o, 3, "- path: %s", q(f.path))
			w.line(f.o, 4, "source: %s", q(f.source))
			w.line(f.o, 4, "mode: %s", q(fmt.Sprintf("%04o", uint32(f.mode))))
		}
	}
	if len(n.exec) > 0 {
		if n.image != nil { // containerlab runs exec in the started container: the entrypoint runs too
			w.line(n.exec[0].o, 2, "keep-entrypoint: true")
		}
		w.line(n.exec[0].o, 2, "exec:")
		for _, e := range n.exec {
			w.line(e.o, 3, "- %s", q(e.s))
		}
	}
}

// pairs writes a mapping of strings under key; the key's line comes from the mapping of its
// first entry.
func (w *writer) pairs(key string, ps []pair) {
	if len(ps) == 0 {
		return
	}
	w.line(origin{ps[0].val.o.line, ps[0].parent}, 2, "%s:", key)
	for _, p := range ps {
		w.line(p.val.o, 3, "%s: %s", q(p.key), q(p.val.s))
	}
}

var (
	plainRE    = regexp.MustCompile(`^[A-Za-z0-9_/.][A-Za-z0-9_./@+:=, -]*$`)
	yamlTokens = map[string]bool{"null": true, "Null": true, "NULL": true, "~": true, "true": true, "false": true, "True": true,
		"False": true, "yes": true, "no": true, "on": true, "off": true, "y": true, "n": true, "Yes": true, "No": true}
)

// q writes a string as a YAML scalar: as it is where YAML reads it back unchanged, else
// double-quoted (JSON's quoting, which YAML reads).
func q(s string) string {
	if plainRE.MatchString(s) && !yamlTokens[s] && !strings.Contains(s, ": ") && !strings.HasSuffix(s, ":") &&
		!strings.HasSuffix(s, " ") && !strings.Contains(s, " #") {
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
