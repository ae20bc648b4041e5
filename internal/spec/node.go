package spec

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxSource is the largest `source:` file read into a node.
const maxSource = 16 << 20

// nodeKeys are the keys every node may have; the keys of the kinds' settings come after the
// first nodeKeysBefore of them in the list of allowed keys that messages show.
var nodeKeys = []string{"kind", "host", "addresses", "exec", "files", "sysctl", "cpu", "memory", "cpuset", "pids",
	"engines", "dispatch", "rootfs", "image", "entrypoint", "cmd", "env", "keep-entrypoint", "dataplane"}

const nodeKeysBefore = 10

func (p *parser) node(key, val *yaml.Node, index int) *Node {
	field := join("nodes", key.Value)
	nd := &Node{Name: key.Value, Line: key.Line, Addresses: map[string][]string{}, Sysctl: map[string]string{},
		index: index, lines: map[string]int{}}
	p.checkName(key, field, nd.Name, maxNodeName)
	if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
		return nd // `r1:` with nothing under it
	}
	f, _ := p.fields(val, field, slices.Concat(nodeKeys[:nodeKeysBefore], settingsKeys(), nodeKeys[nodeKeysBefore:])...)
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
	if v := f["cpuset"]; v != nil {
		nd.Cpuset = p.cpuset(v, field+".cpuset")
	}
	if v := f["pids"]; v != nil {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if v.Kind != yaml.ScalarNode || err != nil || n < MinPids || n > 1<<22 {
			p.fail(v, field+".pids", fmt.Sprintf("%q is not a process limit", v.Value), fmt.Sprintf("give a whole number from %d to %d, e.g. 512", MinPids, 1<<22))
		} else {
			nd.Pids = n
		}
	}
	if v := f["dataplane"]; v != nil {
		nd.Dataplane = p.dataplane(v, field+".dataplane")
	}
	if v := f["rootfs"]; v != nil {
		nd.Rootfs = p.rootfs(v, field+".rootfs")
	}
	if v := f["image"]; v != nil {
		nd.Image = p.image(v, field+".image")
	}
	nd.ImageSet = p.imageKeys(f, field)
	p.nodeSettings(nd, f, field)
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
		f, ok := p.fields(item, fld, "path", "content", "source", "mode", "owner")
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
		if m := f["mode"]; m != nil {
			file.Mode = p.fileMode(m, fld+".mode")
		}
		if o := f["owner"]; o != nil {
			file.Owner = p.fileOwner(o, fld+".owner")
		}
		out = append(out, file)
	}
	return out
}

// MinPids is the lowest process limit a node may have: its init, a shell and a daemon or two.
const MinPids = 8

var cpusetRE = regexp.MustCompile(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)

// cpuset reads a list of cores, as the kernel writes them: 0-1,3.
func (p *parser) cpuset(v *yaml.Node, field string) string {
	ok := v.Kind == yaml.ScalarNode && cpusetRE.MatchString(v.Value)
	for _, r := range strings.Split(v.Value, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, _ := strconv.Atoi(lo)
		b, _ := strconv.Atoi(hi)
		ok = ok && (!isRange || b >= a) && a < 4096 && b < 4096
	}
	if !ok {
		p.fail(v, field, fmt.Sprintf("%q is not a list of cores", v.Value), "list core numbers and ranges as the kernel does, e.g. 0-1,3")
		return ""
	}
	return v.Value
}

// fileMode reads a file's permission bits, in octal as chmod takes them: 640, 0640 or 0o640.
func (p *parser) fileMode(m *yaml.Node, field string) uint32 {
	v := strings.TrimPrefix(strings.TrimPrefix(m.Value, "0o"), "0")
	mode, err := strconv.ParseUint(v, 8, 32)
	if m.Kind != yaml.ScalarNode || (err != nil && v != "") || mode > 0o7777 {
		p.fail(m, field, fmt.Sprintf("%q is not a file mode", m.Value), "give octal permission bits as chmod takes them, e.g. 0640 or 0755")
		return 0
	}
	if mode == 0 {
		p.fail(m, field, "mode 0 would make the file unreadable even to its owner", "give e.g. 0600 for a file only its owner reads")
	}
	return uint32(mode)
}

var ownerRE = regexp.MustCompile(`^([a-z_][a-z0-9_.-]*[$]?|[0-9]+)(:([a-z_][a-z0-9_.-]*[$]?|[0-9]+))?$`)

// fileOwner reads a file's owner: USER or USER:GROUP, each a name (looked up in the node's
// /etc/passwd and /etc/group when it starts) or a number below 65536 (the node's ids).
func (p *parser) fileOwner(o *yaml.Node, field string) string {
	m := ownerRE.FindStringSubmatch(o.Value)
	for _, id := range []string{get(m, 1), get(m, 3)} {
		if n, err := strconv.Atoi(id); err == nil && n >= 65536 {
			m = nil
		}
	}
	if o.Kind != yaml.ScalarNode || m == nil {
		p.fail(o, field, fmt.Sprintf("%q is not an owner", o.Value), "write USER or USER:GROUP, names or numbers below 65536, e.g. frr:frr")
		return ""
	}
	return o.Value
}

func get(m []string, i int) string {
	if i < len(m) {
		return m[i]
	}
	return ""
}

// source reads the file a `source:` names, relative to the topology file.
func (p *parser) source(s *yaml.Node, field string) string {
	src, ok := p.str(s, field)
	if !ok || p.hostPath(s, field, "send the file's text in `content:` instead of `source:`") {
		return ""
	}
	src = p.besideFile(src)
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
