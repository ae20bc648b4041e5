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
var writableDirs = []string{"/etc/", "/run/", "/var/run/", "/tmp/", "/var/tmp/", "/var/log/"}

func checkName(p *parser, at *yaml.Node, field, name string, max int) error {
	if !nameRE.MatchString(name) || len(name) > max {
		return p.errf(at, field, fmt.Sprintf("%q is not a valid name", name),
			fmt.Sprintf("use letters, digits, '-' and '_', starting with a letter or digit, at most %d characters", max))
	}
	return nil
}

func checkFilePath(p *parser, at *yaml.Node, field, file string) error {
	// A clean path has no "." or ".." elements, no doubled or trailing slash: "/etc/.." or
	// "/tmp/./" would otherwise pass the prefix test yet not name a file inside the directory.
	if path.Clean(file) == file {
		for _, d := range writableDirs {
			if strings.HasPrefix(file, d) {
				return nil
			}
		}
	}
	return p.errf(at, field, fmt.Sprintf("%q is not in a node's writable directories", file),
		"give an absolute file path under /etc, /run, /var/run, /tmp, /var/tmp or /var/log")
}

func checkAddresses(p *parser, at *yaml.Node, field string, addrs []string) error {
	for i, a := range addrs {
		if _, err := netip.ParsePrefix(a); err != nil {
			return p.errf(at.Content[i], fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q is not an address with a prefix length", a),
				"write it in CIDR form, e.g. 10.0.0.1/24 or fd00::1/64")
		}
	}
	return nil
}

func checkSysctl(p *parser, at *yaml.Node, field string) error {
	if !strings.HasPrefix(at.Value, "net.") || strings.Contains(at.Value, "/") || strings.Contains(at.Value, "..") {
		return p.errf(at, field, "only net.* sysctls belong to a node", "remove it, or name a net.* sysctl such as net.ipv4.ip_forward")
	}
	return nil
}

func parseEndpoint(s string) (Endpoint, error) {
	node, ifname, ok := strings.Cut(s, ":")
	if !ok || node == "" || ifname == "" {
		return Endpoint{}, fmt.Errorf("%q is not an endpoint", s)
	}
	return Endpoint{Node: node, Ifname: ifname}, nil
}

// validate checks what spans several parts of the file: endpoints against nodes, interfaces
// used twice, link names and connectors.
func validate(n *Network) error {
	if err := validateHosts(n); err != nil {
		return err
	}
	used := map[Endpoint]int{} // endpoint (Line zero) -> index of the link that uses it
	names := map[string]bool{}
	for i, l := range n.Links {
		field := fmt.Sprintf("links[%d]", i)
		if err := validateLink(n, l, field, used, i); err != nil {
			return err
		}
		if l.Name == "" {
			l.Name = fmt.Sprintf("link%d", i+1)
		}
		if names[l.Name] {
			return &Error{n.File, lineOr(l.nameLine, l.Line), field + ".name", fmt.Sprintf("duplicate link name %q", l.Name), "give every link a different name"}
		}
		names[l.Name] = true
	}
	for _, nd := range n.Nodes {
		// In file order, so that the same file always gives the same error.
		ifnames := make([]string, 0, len(nd.Addresses))
		for ifname := range nd.Addresses {
			ifnames = append(ifnames, ifname)
		}
		slices.SortFunc(ifnames, func(a, b string) int { return nd.addrLine[a] - nd.addrLine[b] })
		for _, ifname := range ifnames {
			if ifname == "lo" {
				continue
			}
			if _, ok := used[Endpoint{Node: nd.Name, Ifname: ifname}]; !ok {
				return &Error{n.File, nd.addrLine[ifname], "nodes." + nd.Name + ".addresses." + ifname,
					"no link has this interface as an endpoint", "add a link with endpoint " + nd.Name + ":" + ifname + ", or remove these addresses"}
			}
		}
	}
	return nil
}

func validateLink(n *Network, l *Link, field string, used map[Endpoint]int, index int) error {
	if len(l.Endpoints) < 2 {
		return &Error{n.File, lineOr(l.endpointsLine, l.Line), field + ".endpoints", "a link needs at least two endpoints", "list two endpoints for a point-to-point link, more for a LAN"}
	}
	if l.Name != "" && !nameRE.MatchString(l.Name) {
		return &Error{n.File, lineOr(l.nameLine, l.Line), field + ".name", fmt.Sprintf("%q is not a valid name", l.Name), "use letters, digits, '-' and '_'"}
	}
	for j, e := range l.Endpoints {
		ef := fmt.Sprintf("%s.endpoints[%d]", field, j)
		if n.Node(e.Node) == nil {
			return &Error{n.File, e.Line, ef, fmt.Sprintf("no node named %q", e.Node), "declare it under nodes, or correct the name"}
		}
		if err := checkIfname(e.Ifname); err != nil {
			return &Error{n.File, e.Line, ef, err.Error(), "use a name of 1 to 15 letters, digits, '-', '_' or '.', such as eth1"}
		}
		k := Endpoint{Node: e.Node, Ifname: e.Ifname} // without Line, which differs from use to use
		if prev, dup := used[k]; dup {
			return &Error{n.File, e.Line, ef, fmt.Sprintf("interface %s is already used by links[%d]", e, prev), "give this endpoint another interface name"}
		}
		used[k] = index
	}
	switch l.Connector {
	case "":
		l.Connector = Shortbridge
		if len(l.Endpoints) > 2 {
			l.Connector = Bridge
		}
	case Bridge:
	case Shortbridge:
		if len(l.Endpoints) > 2 {
			return &Error{n.File, lineOr(l.connectorLine, l.Line), field + ".connector", "a shortbridge joins exactly two endpoints", "use `connector: bridge` for a LAN"}
		}
	default:
		return &Error{n.File, lineOr(l.connectorLine, l.Line), field + ".connector", fmt.Sprintf("unknown connector %q", l.Connector), "write shortbridge or bridge"}
	}
	return nil
}

// lineOr returns line, or def when line is unknown (0).
func lineOr(line, def int) int {
	if line == 0 {
		return def
	}
	return line
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
		for k, v := range DefaultSysctl {
			if _, set := nd.Sysctl[k]; !set {
				nd.Sysctl[k] = v
			}
		}
	}
}
