package spec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Dataplane is a node's own forwarding program (`dataplane: {program: FILE}`, docs/ebpf-nodes.md):
// eBPF that trellis compiles (C) or takes as it is (an ELF object, FILE ending in .o), and
// runs in the substrate on every frame that comes to one of the node's ports.
type Dataplane struct {
	Program string // as written in the file
	Path    string // absolute (or relative to the working directory), for messages and includes
	Object  bool   // Source is a compiled ELF object, not C
	Source  []byte // the file's content, read when the topology is
}

// MaxDataplanePort is the highest port number of a node with a dataplane program.
const MaxDataplanePort = 63

var portNumberRE = regexp.MustCompile(`^[a-z]*([0-9]+)$`)

// DataplanePort returns the port number of interface ifname of a node with a dataplane
// program: the number its name ends with (eth1: 1, swp12: 12).
func DataplanePort(ifname string) (int, bool) {
	m := portNumberRE.FindStringSubmatch(ifname)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil && n >= 1 && n <= MaxDataplanePort
}

func (p *parser) dataplane(v *yaml.Node, field string) *Dataplane {
	f, ok := p.fields(v, field, "program")
	if !ok {
		return nil
	}
	prog := f["program"]
	if prog == nil {
		p.fail(v, field+".program", "missing", "name the program's file, e.g. `program: switch.c` (C) or `program: switch.o` (compiled)")
		return nil
	}
	src, ok := p.str(prog, field+".program")
	if !ok || p.hostPath(prog, field+".program", "a program is not sent to the API yet") {
		return nil
	}
	if p.cluster {
		p.fail(prog, field+".program", "a dataplane program runs on one machine's network, not yet in a cluster", "run it with `trellis up FILE` on one machine")
		return nil
	}
	d := &Dataplane{Program: src, Path: p.besideFile(src), Object: strings.HasSuffix(src, ".o")}
	if !d.Object && !strings.HasSuffix(src, ".c") {
		p.fail(prog, field+".program", fmt.Sprintf("%q is neither C (.c) nor a compiled object (.o)", src), "name a .c file, or a .o compiled with clang -target bpf")
		return nil
	}
	data, err := p.read(d.Path)
	if err != nil {
		p.fail(prog, field+".program", fmt.Sprintf("cannot read %s: %v", d.Path, err), "give a path relative to the topology file")
		return nil
	}
	d.Source = data
	return d
}

// validateDataplane checks a node with a dataplane program: of a kind that takes one (a
// container: its ports are veth pairs whose substrate ends carry the program), no engines, and
// interfaces whose names number its ports.
func (p *parser) validateDataplane(n *Network, nd *Node) {
	if nd.Dataplane == nil {
		return
	}
	k, _ := nodeKinds.lookup(nd.Kind)
	p.takes(n, nd, k, KeyDataplane, Refusal{"a dataplane program needs a node of kind " + DefaultNodeKind + ", not " + nd.Kind,
		"remove dataplane, or the node's kind"})
	if len(nd.Engines) > 0 {
		p.add(n.NodeError(nd, "dataplane", "a node with a dataplane program forwards with it, not with engines", "remove engines or dataplane"))
	}
	seen := map[int]string{}
	for _, l := range n.Links {
		for _, e := range l.Endpoints {
			if e.Node != nd.Name {
				continue
			}
			port, ok := DataplanePort(e.Ifname)
			if !ok {
				p.add(n.LinkError(l, "endpoints", fmt.Sprintf("interface %s of %s: a node with a dataplane program numbers its ports by the number its interfaces' names end with, from 1 to %d",
					e.Ifname, nd.Name, MaxDataplanePort), "name the interface e.g. eth1 (port 1)"))
				continue
			}
			if other, dup := seen[port]; dup {
				p.add(n.LinkError(l, "endpoints", fmt.Sprintf("interfaces %s and %s of %s are both port %d", other, e.Ifname, nd.Name, port),
					"give each interface its own number"))
			}
			seen[port] = e.Ifname
		}
	}
}
