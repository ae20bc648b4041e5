package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load reads, parses and validates the topology file at path.
func Load(path string) (*Network, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading topology file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates a topology file's content; file names it in errors and anchors
// relative `source:` paths.
func Parse(file string, data []byte) (*Network, error) {
	p := &parser{file: file}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, p.yamlError(err)
	}
	if len(doc.Content) == 0 { // empty, or only comments: Decode says io.EOF
		return nil, p.errf(&doc, "(file)", "the file is empty", "write a network with name, nodes and links")
	}
	n, err := p.network(doc.Content[0])
	if err != nil {
		return nil, err
	}
	if err := validate(n); err != nil {
		return nil, err
	}
	setDefaults(n)
	return n, nil
}

type parser struct {
	file string
}

// yamlLineRE picks the line out of a yaml.v3 syntax error, "yaml: line 3: mapping values are ...".
var yamlLineRE = regexp.MustCompile(`^yaml: line ([0-9]+): (.*)$`)

// yamlError turns a YAML syntax error into an *Error with the line the YAML library names.
func (p *parser) yamlError(err error) *Error {
	e := &Error{File: p.file, Field: "(file)", Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: "),
		Fix: "check the indentation (spaces, not tabs), colons, brackets and quoting near this line"}
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = "not valid YAML: " + m[2]
	}
	return e
}

func (p *parser) errf(at *yaml.Node, field, msg, fix string) *Error {
	return &Error{File: p.file, Line: at.Line, Field: field, Msg: msg, Fix: fix}
}

// fields returns a mapping's values by key. It rejects keys not in allowed and keys given twice,
// so that a typo never silently drops a setting.
func (p *parser) fields(n *yaml.Node, field string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, field, "expected a mapping of keys to values", "see the topology file reference in README.md")
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !contains(allowed, k.Value) {
			return nil, p.errf(k, join(field, k.Value), "unknown key", fmt.Sprintf("the keys allowed here are %v", allowed))
		}
		if _, dup := out[k.Value]; dup {
			return nil, p.errf(k, join(field, k.Value), "key given twice", "keep only one")
		}
		out[k.Value] = v
	}
	return out, nil
}

func (p *parser) network(root *yaml.Node) (*Network, error) {
	if root.Kind != yaml.MappingNode {
		return nil, p.errf(root, "(file)", "expected a mapping with the keys name, nodes and links", "see the topology file reference in README.md")
	}
	f, err := p.fields(root, "", "name", "hosts", "tunnel", "nodes", "links")
	if err != nil {
		return nil, err
	}
	n := &Network{File: p.file}
	if err := p.machines(n, f["hosts"], f["tunnel"]); err != nil {
		return nil, err
	}
	if f["name"] == nil {
		return nil, p.errf(root, "name", "missing", "give the network a name, e.g. `name: lab1`")
	}
	if n.Name, err = p.str(f["name"], "name"); err != nil {
		return nil, err
	}
	if err := checkName(p, f["name"], "name", n.Name, maxNetworkName); err != nil {
		return nil, err
	}
	if nodes := f["nodes"]; nodes != nil {
		if nodes.Kind != yaml.MappingNode {
			return nil, p.errf(nodes, "nodes", "expected a mapping from node name to node", "write `nodes:` then `  r1: {}` lines")
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(nodes.Content); i += 2 {
			k := nodes.Content[i]
			if seen[k.Value] {
				return nil, p.errf(k, "nodes."+k.Value, "duplicate node name", "give every node a different name")
			}
			seen[k.Value] = true
			nd, err := p.node(k, nodes.Content[i+1])
			if err != nil {
				return nil, err
			}
			n.Nodes = append(n.Nodes, nd)
		}
	}
	if links := f["links"]; links != nil {
		if links.Kind != yaml.SequenceNode {
			return nil, p.errf(links, "links", "expected a list of links", "write each link as `- endpoints: [a:eth1, b:eth1]`")
		}
		for i, l := range links.Content {
			lk, err := p.link(l, fmt.Sprintf("links[%d]", i))
			if err != nil {
				return nil, err
			}
			n.Links = append(n.Links, lk)
		}
	}
	return n, nil
}

func (p *parser) node(key, val *yaml.Node) (*Node, error) {
	field := "nodes." + key.Value
	nd := &Node{Name: key.Value, Line: key.Line, Addresses: map[string][]string{}, Sysctl: map[string]string{}, addrLine: map[string]int{}}
	if err := checkName(p, key, field, nd.Name, maxNodeName); err != nil {
		return nil, err
	}
	if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
		return nd, nil // `r1:` with nothing under it
	}
	f, err := p.fields(val, field, "host", "addresses", "exec", "files", "sysctl")
	if err != nil {
		return nil, err
	}
	if h := f["host"]; h != nil {
		if nd.Host, err = p.str(h, field+".host"); err != nil {
			return nil, err
		}
		nd.hostLine = h.Line
	}
	if a := f["addresses"]; a != nil {
		if a.Kind != yaml.MappingNode {
			return nil, p.errf(a, field+".addresses", "expected a mapping from interface to addresses", "write e.g. `eth1: [10.0.0.1/24]`")
		}
		for i := 0; i+1 < len(a.Content); i += 2 {
			ifname := a.Content[i].Value
			if _, dup := nd.Addresses[ifname]; dup {
				return nil, p.errf(a.Content[i], field+".addresses."+ifname, "interface given twice", "list all its addresses under one key")
			}
			addrs, err := p.strs(a.Content[i+1], field+".addresses."+ifname)
			if err != nil {
				return nil, err
			}
			if err := checkAddresses(p, a.Content[i+1], field+".addresses."+ifname, addrs); err != nil {
				return nil, err
			}
			nd.Addresses[ifname] = addrs
			nd.addrLine[ifname] = a.Content[i].Line
		}
	}
	if e := f["exec"]; e != nil {
		if nd.Exec, err = p.strs(e, field+".exec"); err != nil {
			return nil, err
		}
	}
	if fl := f["files"]; fl != nil {
		if nd.Files, err = p.files(fl, field+".files"); err != nil {
			return nil, err
		}
	}
	if s := f["sysctl"]; s != nil {
		if s.Kind != yaml.MappingNode {
			return nil, p.errf(s, field+".sysctl", "expected a mapping from sysctl to value", "write e.g. `net.ipv4.ip_forward: 0`")
		}
		for i := 0; i+1 < len(s.Content); i += 2 {
			k, v := s.Content[i], s.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return nil, p.errf(v, field+".sysctl."+k.Value, "expected a single value", "write e.g. `net.ipv4.ip_forward: 0`")
			}
			if err := checkSysctl(p, k, field+".sysctl."+k.Value); err != nil {
				return nil, err
			}
			if _, dup := nd.Sysctl[k.Value]; dup {
				return nil, p.errf(k, field+".sysctl."+k.Value, "sysctl given twice", "keep only one")
			}
			nd.Sysctl[k.Value] = v.Value
		}
	}
	return nd, nil
}

func (p *parser) files(n *yaml.Node, field string) ([]File, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, field, "expected a list of files", "write each as `- path: /etc/x.conf` with `content:` or `source:`")
	}
	var out []File
	for i, item := range n.Content {
		fld := fmt.Sprintf("%s[%d]", field, i)
		f, err := p.fields(item, fld, "path", "content", "source")
		if err != nil {
			return nil, err
		}
		if f["path"] == nil {
			return nil, p.errf(item, fld+".path", "missing", "say where the file goes inside the node, e.g. `path: /etc/bird/bird.conf`")
		}
		var file File
		if file.Path, err = p.str(f["path"], fld+".path"); err != nil {
			return nil, err
		}
		switch c, s := f["content"], f["source"]; {
		case c != nil && s != nil:
			return nil, p.errf(s, fld+".source", "both content and source given", "keep one of them")
		case c != nil:
			if file.Content, err = p.str(c, fld+".content"); err != nil {
				return nil, err
			}
		case s != nil:
			src, err := p.str(s, fld+".source")
			if err != nil {
				return nil, err
			}
			if !filepath.IsAbs(src) {
				src = filepath.Join(filepath.Dir(p.file), src)
			}
			data, err := os.ReadFile(src)
			if err != nil {
				return nil, p.errf(s, fld+".source", fmt.Sprintf("cannot read %s: %v", src, err), "give a path relative to the topology file")
			}
			file.Content = string(data)
		default:
			return nil, p.errf(item, fld, "neither content nor source given", "add `content: |` with the text, or `source: path/relative/to/topology`")
		}
		out = append(out, file)
		if err := checkFilePath(p, f["path"], fld+".path", file.Path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (p *parser) link(n *yaml.Node, field string) (*Link, error) {
	f, err := p.fields(n, field, "name", "endpoints", "rate", "mtu", "connector")
	if err != nil {
		return nil, err
	}
	l := &Link{Line: n.Line}
	if v := f["name"]; v != nil {
		if l.Name, err = p.str(v, field+".name"); err != nil {
			return nil, err
		}
		l.nameLine = v.Line
	}
	ep := f["endpoints"]
	if ep == nil {
		return nil, p.errf(n, field+".endpoints", "missing", "list the interfaces the link joins, e.g. `endpoints: [r1:eth1, r2:eth1]`")
	}
	eps, err := p.strs(ep, field+".endpoints")
	if err != nil {
		return nil, err
	}
	l.endpointsLine = ep.Line
	for i, s := range eps {
		e, err := parseEndpoint(s)
		if err != nil {
			return nil, p.errf(ep.Content[i], fmt.Sprintf("%s.endpoints[%d]", field, i), err.Error(), "write NODE:IFNAME, e.g. r1:eth1")
		}
		e.Line = ep.Content[i].Line
		l.Endpoints = append(l.Endpoints, e)
	}
	if v := f["rate"]; v != nil {
		if l.RateText, err = p.str(v, field+".rate"); err != nil {
			return nil, err
		}
		if l.Rate, err = ParseRate(l.RateText); err != nil {
			return nil, p.errf(v, field+".rate", err.Error(), "write a number and a unit such as 500kbit, 10mbit or 1gbit")
		}
	}
	if v := f["mtu"]; v != nil {
		mtu, err := strconv.Atoi(v.Value)
		if err != nil || mtu < minMTU || mtu > maxMTU {
			return nil, p.errf(v, field+".mtu", fmt.Sprintf("%q is not an MTU", v.Value), fmt.Sprintf("give a whole number from %d to %d", minMTU, maxMTU))
		}
		l.MTU, l.MTULine = mtu, v.Line
	}
	if v := f["connector"]; v != nil {
		if l.Connector, err = p.str(v, field+".connector"); err != nil {
			return nil, err
		}
		l.connectorLine = v.Line
	}
	return l, nil
}

func (p *parser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.errf(n, field, "expected a single value", "write it on one line after the colon, or as a `|` block")
	}
	return n.Value, nil
}

func (p *parser) strs(n *yaml.Node, field string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, field, "expected a list", "write `[a, b]` or one `- item` per line")
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		s, err := p.str(c, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
