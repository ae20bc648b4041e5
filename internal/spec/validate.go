package spec

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

const (
	maxNetworkName = 40
	maxNodeName    = 63 // a hostname label
	maxIfname      = 15 // IFNAMSIZ - 1
	minMTU         = 68
	maxMTU         = 65535
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// writableDirs are the node's private writable directories; files may only go there, since the
// rest of the host's file system is read-only inside a node.
var writableDirs = []string{"/etc/", "/run/", "/var/run/", "/tmp/", "/var/tmp/", "/var/log/", "/var/lib/"}

func (p *parser) checkName(at *yaml.Node, field, name string, max int) bool {
	if !nameRE.MatchString(name) || len(name) > max {
		p.fail(at, field, fmt.Sprintf("%q is not a valid name", name),
			fmt.Sprintf("use letters, digits, '-' and '_', starting with a letter or digit, at most %d characters", max))
		return false
	}
	return true
}

// fileInWritableDir says whether a file path lies in one of a node's writable directories.
func fileInWritableDir(file string) bool {
	// A clean path has no "." or ".." elements, no doubled or trailing slash: "/etc/.." or
	// "/tmp/./" would otherwise pass the prefix test yet not name a file inside the directory.
	if path.Clean(file) != file {
		return false
	}
	for _, d := range writableDirs {
		if strings.HasPrefix(file, d) {
			return true
		}
	}
	return false
}

func (p *parser) checkFilePath(at *yaml.Node, field, file string) {
	if !fileInWritableDir(file) {
		p.fail(at, field, fmt.Sprintf("%q is not in a node's writable directories", file),
			"give an absolute file path under /etc, /run, /var/run, /tmp, /var/tmp, /var/log or /var/lib")
	}
}

func (p *parser) checkAddresses(at []*yaml.Node, field string, addrs []string) {
	for i, a := range addrs {
		if _, err := netip.ParsePrefix(a); err != nil {
			p.fail(at[i], fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q is not an address with a prefix length", a),
				"write it in CIDR form, e.g. 10.0.0.1/24 or fd00::1/64")
		}
	}
}

func sysctlOK(name string) bool {
	return strings.HasPrefix(name, "net.") && !strings.Contains(name, "/") && !strings.Contains(name, "..")
}

func (p *parser) checkSysctl(at *yaml.Node, field string) bool {
	if !sysctlOK(at.Value) {
		p.fail(at, field, "only net.* sysctls belong to a node", "remove it, or name a net.* sysctl such as net.ipv4.ip_forward")
		return false
	}
	return true
}

func parseEndpoint(s string) (Endpoint, error) {
	node, ifname, ok := strings.Cut(s, ":")
	if !ok || node == "" || ifname == "" {
		return Endpoint{}, fmt.Errorf("%q is not an endpoint", s)
	}
	return Endpoint{Node: node, Ifname: ifname}, nil
}

// validate checks what spans several parts of the file: nodes' hosts and kinds, endpoints
// against nodes, interfaces used twice, link names, connectors and tunnels.
func (p *parser) validate(n *Network) {
	if !p.hostsBad {
		p.validateHosts(n)
	}
	p.validateTunnelSettings(n)
	if k, ok := tunnelKinds.lookup(n.Tunnel); ok && k.Check != nil {
		p.add(k.Check(n)...)
	}
	for _, nd := range n.Nodes {
		if nd.Kind == "" {
			nd.Kind = DefaultNodeKind
		}
		k, ok := nodeKinds.lookup(nd.Kind)
		if !ok {
			p.add(n.NodeError(nd, "kind", fmt.Sprintf("unknown node kind %q", nd.Kind), useOneOf(NodeKinds())))
			continue
		}
		p.validateSettings(n, nd)
		p.validateRootfs(n, nd, k)
		p.validateImage(n, nd, k)
		p.validateImageKeys(n, nd, k)
		if k.Check != nil {
			p.add(k.Check(n, nd)...)
		}
		p.validateEngines(n, nd)
		p.validateDataplane(n, nd)
	}
	used := map[Endpoint]int{} // endpoint (Line zero) -> index of the link that uses it
	for _, l := range n.Links {
		p.validateLink(n, l, used)
	}
	p.linkNames(n)
	if !p.linksBad && !p.endpointsBad {
		p.unusedAddresses(n, used)
	}
}

// unusedAddresses reports addresses on interfaces that no link has as an endpoint.
func (p *parser) unusedAddresses(n *Network, used map[Endpoint]int) {
	for _, nd := range n.Nodes {
		// In file order, so that the same file always gives the same errors.
		for _, ifname := range nd.ifnames {
			if ifname == "lo" {
				continue
			}
			if _, ok := used[Endpoint{Node: nd.Name, Ifname: ifname}]; !ok {
				p.add(n.NodeError(nd, "addresses."+ifname, "no link has this interface as an endpoint",
					"add a link with endpoint "+nd.Name+":"+ifname+", or remove these addresses"))
			}
		}
	}
}

// linkNames derives the names of links without one and reports names given twice.
func (p *parser) linkNames(n *Network) {
	names := map[string]*Link{}
	for _, l := range n.Links {
		if !l.named {
			if l.incomplete {
				continue
			}
			l.Name = DerivedLinkName(l.Endpoints)
		}
		if l.named && !nameRE.MatchString(l.Name) {
			continue // reported by validateLink
		}
		if prev, dup := names[l.Name]; dup {
			p.add(n.LinkError(l, "name", fmt.Sprintf("duplicate link name %q (links[%d] has it)", l.Name, prev.index), "give every link a different name"))
			continue
		}
		names[l.Name] = l
	}
}

// DerivedLinkName is the name of a link written without one: its endpoints' strings, sorted and
// joined with "--", e.g. a:eth1--b:eth1. It does not change when the file is reordered.
func DerivedLinkName(eps []Endpoint) string {
	s := make([]string, len(eps))
	for i, e := range eps {
		s[i] = e.String()
	}
	slices.Sort(s)
	return strings.Join(s, "--")
}

var ifnameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func checkIfname(name string) error {
	switch {
	case len(name) > maxIfname:
		return fmt.Errorf("interface name %q is longer than %d characters", name, maxIfname)
	case name == "lo" || name == "." || name == "..":
		return fmt.Errorf("interface name %q is reserved", name)
	case !ifnameRE.MatchString(name):
		return fmt.Errorf("interface name %q has characters an interface name cannot have", name)
	}
	return nil
}

// DefaultSysctl is what every node gets unless its topology says otherwise: nodes are routers.
var DefaultSysctl = map[string]string{
	"net.ipv4.ip_forward":          "1",
	"net.ipv6.conf.all.forwarding": "1",
}

func setDefaults(n *Network) {
	for _, nd := range n.Nodes {
		engineDefaults(nd)
		for k, v := range DefaultSysctl {
			if _, set := nd.Sysctl[k]; !set {
				nd.Sysctl[k] = v
			}
		}
	}
	for _, l := range n.Links {
		l.Impair = withDistribution(l.Impair)
		for k, im := range l.From {
			l.From[k] = withDistribution(im)
		}
	}
}

func withDistribution(im Impairment) Impairment {
	if im.Jitter > 0 && im.Distribution == "" {
		im.Distribution = DefaultDistribution
	}
	return im
}
