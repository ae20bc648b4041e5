package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load reads, parses and validates the topology file at path. Problems in the file come back
// as Errors, all of them at once.
func Load(path string) (*Network, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading topology file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates a topology file's content; file names it in errors and anchors
// relative `source:` paths. Problems come back as Errors, every one the file has, sorted by
// line; a file that is not YAML at all gives one.
func Parse(file string, data []byte) (*Network, error) {
	return parse(file, data, readSource)
}

// ParseCluster parses and validates a topology file of a network in a cluster (docs/cluster.md):
// the machines are those registered in etcd, so the file has no `hosts:`, a node's `host:` may
// name any machine (the placer checks it against the registered ones) and `tunnel:` stands
// alone (default egre). read reads the `source:` files (nil: ReadSource, from the file system);
// the agents read them from what `up` stored.
func ParseCluster(file string, data []byte, read func(path string) ([]byte, error)) (*Network, error) {
	if read == nil {
		read = readSource
	}
	return parseAs(file, data, read, true)
}

// ReadSource reads a `source:` file as Parse does.
func ReadSource(path string) ([]byte, error) { return readSource(path) }

// parse is Parse with the reader of `source:` files given (the fuzz test reads none).
func parse(file string, data []byte, read func(string) ([]byte, error)) (*Network, error) {
	return parseAs(file, data, read, false)
}

// parseAs parses a file of one machine's network, or of a cluster's.
func parseAs(file string, data []byte, read func(string) ([]byte, error), cluster bool) (*Network, error) {
	return (&parser{file: file, read: read, cluster: cluster}).parse(data)
}

// parse parses and validates data as the parser is set up.
func (p *parser) parse(data []byte) (*Network, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, Errors{p.yamlError(err)}
	}
	if len(doc.Content) == 0 { // empty, or only comments: Decode says io.EOF
		return nil, Errors{p.errf(&doc, "(file)", "the file is empty", "write a network with name, nodes and links")}
	}
	n := p.network(doc.Content[0])
	if n != nil {
		p.validate(n)
	}
	if len(p.errs) > 0 {
		return nil, sortErrors(p.errs)
	}
	setDefaults(n)
	if p.cluster {
		clusterLimits(n)
	}
	return n, nil
}

// parser reads one file, collecting every problem instead of stopping at the first. It notes
// which parts it could not read, so that the checks across parts do not report their
// consequences (an unreadable `nodes:` is one problem, not one per endpoint).
type parser struct {
	file string
	read func(string) ([]byte, error) // reads a `source:` file
	// cluster: the file is a cluster's, whose machines are registered in etcd, not listed.
	cluster bool
	// sent: the file came from a client that may name no path on this machine (hostpath.go).
	sent bool
	errs []*Error

	hostsBad, nodesBad, linksBad bool // the section is there but could not be read
	endpointsBad                 bool // some link's endpoints could not be read
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

// fail records a problem at a node of the YAML tree.
func (p *parser) fail(at *yaml.Node, field, msg, fix string) {
	p.errs = append(p.errs, p.errf(at, field, msg, fix))
}

// add records problems found by a check.
func (p *parser) add(errs ...*Error) {
	for _, e := range errs {
		if e != nil {
			p.errs = append(p.errs, e)
		}
	}
}

// fields returns a mapping's values by key. It reports keys not in allowed and keys given
// twice (and leaves them out), so that a typo never silently drops a setting. ok is false when
// n is not a mapping at all.
func (p *parser) fields(n *yaml.Node, field string, allowed ...string) (out map[string]*yaml.Node, ok bool) {
	if n.Kind != yaml.MappingNode {
		p.fail(n, field, "expected a mapping of keys to values", "see the topology file reference in README.md")
		return nil, false
	}
	out = map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch _, dup := out[k.Value]; {
		case !contains(allowed, k.Value):
			p.fail(k, join(field, k.Value), "unknown key", fmt.Sprintf("the keys allowed here are %v", allowed))
		case dup:
			p.fail(k, join(field, k.Value), "key given twice", "keep only one")
		default:
			out[k.Value] = v
		}
	}
	return out, true
}

// mapping describes a mapping with keys of the user's choosing, for pairs' messages.
type mapping struct {
	want, wantFix string // when it is not a mapping: "expected ...", and the fix
	dup, dupFix   string // when a key is given twice
}

// pairs returns a mapping's keys and values, reporting keys given twice (and leaving them out).
// ok is false when n is not a mapping.
func (p *parser) pairs(n *yaml.Node, field string, m mapping) (keys, vals []*yaml.Node, ok bool) {
	if n.Kind != yaml.MappingNode {
		p.fail(n, field, m.want, m.wantFix)
		return nil, nil, false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if seen[k.Value] {
			p.fail(k, join(field, k.Value), m.dup, m.dupFix)
			continue
		}
		seen[k.Value] = true
		keys, vals = append(keys, k), append(vals, n.Content[i+1])
	}
	return keys, vals, true
}

func (p *parser) network(root *yaml.Node) *Network {
	if root.Kind != yaml.MappingNode {
		p.fail(root, "(file)", "expected a mapping with the keys name, nodes and links", "see the topology file reference in README.md")
		return nil
	}
	f, _ := p.fields(root, "", "name", "hosts", "tunnel", "secret", "nodes", "links")
	n := &Network{File: p.file, lines: map[string]int{}}
	for k, v := range f {
		n.lines[k] = v.Line
	}
	p.machines(n, f["hosts"], f["tunnel"])
	p.secret(n, f["secret"])
	if f["name"] == nil {
		p.fail(root, "name", "missing", "give the network a name, e.g. `name: lab1`")
	} else if name, ok := p.str(f["name"], "name"); ok {
		n.Name = name
		p.checkName(f["name"], "name", name, maxNetworkName)
	}
	if nodes := f["nodes"]; nodes != nil {
		keys, vals, ok := p.pairs(nodes, "nodes", mapping{"expected a mapping from node name to node", "write `nodes:` then `  r1: {}` lines",
			"duplicate node name", "give every node a different name"})
		p.nodesBad = !ok
		for i, k := range keys {
			n.Nodes = append(n.Nodes, p.node(k, vals[i], i))
		}
	}
	if links := f["links"]; links != nil {
		if links.Kind != yaml.SequenceNode {
			p.fail(links, "links", "expected a list of links", "write each link as `- endpoints: [a:eth1, b:eth1]`")
			p.linksBad = true
		} else {
			for i, l := range links.Content {
				if lk := p.link(l, i); lk != nil {
					n.Links = append(n.Links, lk)
				} else {
					p.linksBad = true
				}
			}
		}
	}
	return n
}

func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.fail(n, field, "expected a single value", "write it on one line after the colon, or as a `|` block")
		return "", false
	}
	return n.Value, true
}

// strs reads a list of single values; ok is false if it is not a list or an item is not a
// single value (the good items are still returned, with their nodes).
func (p *parser) strs(n *yaml.Node, field string) (out []string, at []*yaml.Node, ok bool) {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, field, "expected a list", "write `[a, b]` or one `- item` per line")
		return nil, nil, false
	}
	ok = true
	for i, c := range n.Content {
		s, good := p.str(c, fmt.Sprintf("%s[%d]", field, i))
		if !good {
			ok = false
			continue
		}
		out, at = append(out, s), append(at, c)
	}
	return out, at, ok
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
