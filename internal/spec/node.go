package spec

import (
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// maxSource is the largest `source:` file read into a node.
const maxSource = 16 << 20

func (p *parser) node(key, val *yaml.Node, index int) *Node {
	field := join("nodes", key.Value)
	nd := &Node{Name: key.Value, Line: key.Line, Addresses: map[string][]string{}, Sysctl: map[string]string{},
		index: index, lines: map[string]int{}}
	p.checkName(key, field, nd.Name, maxNodeName)
	if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
		return nd // `r1:` with nothing under it
	}
	f, _ := p.fields(val, field, "kind", "host", "addresses", "exec", "files", "sysctl", "cpu", "memory", "vm", "engines", "dispatch")
	for k, v := range f {
		nd.lines[k] = v.Line
	}
	if v := f["kind"]; v != nil {
		nd.Kind, _ = p.str(v, field+".kind")
	}
	if h := f["host"]; h != nil {
		nd.Host, _ = p.str(h, field+".host")
	}
	if a := f["addresses"]; a != nil {
		p.addresses(nd, a, field+".addresses")
	}
	if e := f["exec"]; e != nil {
		nd.Exec, _, _ = p.strs(e, field+".exec")
	}
	if fl := f["files"]; fl != nil {
		nd.Files = p.files(fl, field+".files")
	}
	if s := f["sysctl"]; s != nil {
		p.sysctls(nd, s, field+".sysctl")
	}
	nd.Needs = p.capacity(f, field, false)
	if e := f["engines"]; e != nil {
		p.engines(nd, e, field+".engines")
	}
	if d := f["dispatch"]; d != nil {
		p.dispatch(nd, d, field+".dispatch")
	}
	if v := f["vm"]; v != nil {
		nd.VM = p.vmSettings(nd, v, field+".vm")
	}
	return nd
}

func (p *parser) addresses(nd *Node, a *yaml.Node, field string) {
	keys, vals, _ := p.pairs(a, field, mapping{"expected a mapping from interface to addresses", "write e.g. `eth1: [10.0.0.1/24]`",
		"interface given twice", "list all its addresses under one key"})
	for i, k := range keys {
		ifname := k.Value
		addrs, at, _ := p.strs(vals[i], join(field, ifname))
		p.checkAddresses(at, join(field, ifname), addrs)
		nd.Addresses[ifname] = addrs
		nd.ifnames = append(nd.ifnames, ifname)
		nd.lines["addresses."+ifname] = k.Line
	}
}

func (p *parser) sysctls(nd *Node, s *yaml.Node, field string) {
	keys, vals, _ := p.pairs(s, field, mapping{"expected a mapping from sysctl to value", "write e.g. `net.ipv4.ip_forward: 0`",
		"sysctl given twice", "keep only one"})
	for i, k := range keys {
		fld := join(field, k.Value)
		v, ok := vals[i], true
		if v.Kind != yaml.ScalarNode {
			p.fail(v, fld, "expected a single value", "write e.g. `net.ipv4.ip_forward: 0`")
			ok = false
		}
		if !p.checkSysctl(k, fld) || !ok {
			continue
		}
		nd.Sysctl[k.Value] = v.Value
	}
}

func (p *parser) files(n *yaml.Node, field string) []File {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, field, "expected a list of files", "write each as `- path: /etc/x.conf` with `content:` or `source:`")
		return nil
	}
	var out []File
	for i, item := range n.Content {
		fld := fmt.Sprintf("%s[%d]", field, i)
		f, ok := p.fields(item, fld, "path", "content", "source")
		if !ok {
			continue
		}
		var file File
		if f["path"] == nil {
			p.fail(item, fld+".path", "missing", "say where the file goes inside the node, e.g. `path: /etc/bird/bird.conf`")
		} else if file.Path, ok = p.str(f["path"], fld+".path"); ok {
			p.checkFilePath(f["path"], fld+".path", file.Path)
		}
		switch c, s := f["content"], f["source"]; {
		case c != nil && s != nil:
			p.fail(s, fld+".source", "both content and source given", "keep one of them")
		case c != nil:
			file.Content, _ = p.str(c, fld+".content")
		case s != nil:
			file.Content = p.source(s, fld+".source")
		default:
			p.fail(item, fld, "neither content nor source given", "add `content: |` with the text, or `source: path/relative/to/topology`")
		}
		out = append(out, file)
	}
	return out
}

// source reads the file a `source:` names, relative to the topology file.
func (p *parser) source(s *yaml.Node, field string) string {
	src, ok := p.str(s, field)
	if !ok {
		return ""
	}
	if !filepath.IsAbs(src) {
		src = filepath.Join(filepath.Dir(p.file), src)
	}
	data, err := p.read(src)
	if err != nil {
		p.fail(s, field, fmt.Sprintf("cannot read %s: %v", src, err), "give a path relative to the topology file")
		return ""
	}
	return string(data)
}

// readSource reads a `source:` file: a regular file (not a device or pipe, which could block or
// never end) of at most maxSource bytes.
func readSource(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("not a regular file")
	case fi.Size() > maxSource:
		return nil, fmt.Errorf("%d bytes, more than the %d a node's file may have", fi.Size(), maxSource)
	}
	return os.ReadFile(path)
}
