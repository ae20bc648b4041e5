package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Each doc starts on the line of its opening backquote, so line 1 is the first line shown.
var parseErrorCases = []struct {
	name string
	doc  string
	want string
}{
	// Unknown keys, at each level.
	{"unknown top-level key", `name: t
nodse:
  r1:
`, `topo.yaml:2: nodse: unknown key; the keys allowed here are [name hosts tunnel secret nodes links]`},
	{"unknown node key", `name: t
nodes:
  r1:
    adresses: {}
`, `topo.yaml:4: nodes.r1.adresses: unknown key; the keys allowed here are [kind host addresses exec files sysctl cpu memory cpuset pids vm engines dispatch rootfs image entrypoint cmd env keep-entrypoint dataplane]`},
	{"vm settings on a container", `name: t
nodes:
  r1:
    vm: {queues: 2}
`, `topo.yaml:4: nodes.r1.vm: a container node has no VM settings; remove ` + "`vm:`" + `, or make the node ` + "`kind: vm`"},
	{"unknown link key", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    speed: 10mbit
`, `topo.yaml:7: links[0].speed: unknown key; the keys allowed here are [name endpoints rate mtu connector state table ageing loss duplicate corrupt delay jitter distribution from]`},
	{"unknown file key", `name: t
nodes:
  r1:
    files:
      - path: /etc/x.conf
        contents: hi
`, "topo.yaml:5: nodes.r1.files[0]: neither content nor source given; add `content: |` with the text, or `source: path/relative/to/topology`\n" +
		`topo.yaml:6: nodes.r1.files[0].contents: unknown key; the keys allowed here are [path content source mode owner]`},
	{"top-level key twice", `name: t
nodes:
  r1:
name: u
`, `topo.yaml:4: name: key given twice; keep only one`},

	// Names.
	{"missing network name", `nodes:
  r1:
`, "topo.yaml:1: name: missing; give the network a name, e.g. `name: lab1`"},
	{"invalid network name", `name: my lab
nodes:
  r1:
`, `topo.yaml:1: name: "my lab" is not a valid name; use letters, digits, '-' and '_', starting with a letter or digit, at most 40 characters`},
	{"network name too long", `name: ` + strings.Repeat("n", 41) + `
`, `topo.yaml:1: name: "` + strings.Repeat("n", 41) + `" is not a valid name; use letters, digits, '-' and '_', starting with a letter or digit, at most 40 characters`},
	{"invalid node name", `name: t
nodes:
  r1:
  -r2:
`, `topo.yaml:4: nodes.-r2: "-r2" is not a valid name; use letters, digits, '-' and '_', starting with a letter or digit, at most 63 characters`},
	{"duplicate node name", `name: t
nodes:
  r1:
  r2:
  r1:
`, `topo.yaml:5: nodes.r1: duplicate node name; give every node a different name`},
	{"duplicate link name", `name: t
nodes:
  r1:
  r2:
links:
  - name: a
    endpoints: [r1:eth1, r2:eth1]
  - endpoints: [r1:eth2, r2:eth2]
    name: a
`, `topo.yaml:9: links[1].name: duplicate link name "a" (links[0] has it); give every link a different name`},
	{"explicit name written like a derived one", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
  - name: r1:eth1--r2:eth1
    endpoints: [r1:eth2, r2:eth2]
`, `topo.yaml:7: links[1].name: "r1:eth1--r2:eth1" is not a valid name; use letters, digits, '-' and '_', or leave the name out to have one derived from the endpoints`},
	{"empty explicit name", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    name: ""
`, `topo.yaml:7: links[0].name: "" is not a valid name; use letters, digits, '-' and '_', or leave the name out to have one derived from the endpoints`},
	{"invalid link name", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    name: a/b
`, `topo.yaml:7: links[0].name: "a/b" is not a valid name; use letters, digits, '-' and '_', or leave the name out to have one derived from the endpoints`},

	// Endpoints.
	{"endpoint names a missing node", `name: t
nodes:
  r1:
  r2:
links:
  - name: a
    endpoints: [r1:eth1, r3:eth1]
`, `topo.yaml:7: links[0].endpoints[1]: no node named "r3"; declare it under nodes, or correct the name`},
	{"missing node in a block list", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints:
      - r1:eth1
      - r2:eth1
  - endpoints:
      - r2:eth2
      - r9:eth2
`, `topo.yaml:11: links[1].endpoints[1]: no node named "r9"; declare it under nodes, or correct the name`},
	{"interface used twice in one link", `name: t
nodes:
  r1:
links:
  - endpoints: [r1:eth1, r1:eth1]
`, `topo.yaml:5: links[0].endpoints[1]: interface r1:eth1 is already used by links[0]; give this endpoint another interface name`},
	{"interface used by two links", `name: t
nodes:
  r1:
  r2:
  r3:
links:
  - endpoints: [r1:eth1, r2:eth1]
  - endpoints: [r3:eth1, r1:eth1]
`, `topo.yaml:8: links[1].endpoints[1]: interface r1:eth1 is already used by links[0]; give this endpoint another interface name`},
	{"interface name too long", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:abcdefghijklmnop]
`, `topo.yaml:6: links[0].endpoints[1]: interface name "abcdefghijklmnop" is longer than 15 characters; use a name of 1 to 15 letters, digits, '-', '_' or '.', such as eth1`},
	{"interface named lo", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:lo, r2:eth1]
`, `topo.yaml:6: links[0].endpoints[0]: interface name "lo" is reserved; use a name of 1 to 15 letters, digits, '-', '_' or '.', such as eth1`},
	{"interface name with a bad character", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, "r2:eth 1"]
`, `topo.yaml:6: links[0].endpoints[1]: interface name "eth 1" has characters an interface name cannot have; use a name of 1 to 15 letters, digits, '-', '_' or '.', such as eth1`},
	{"endpoint without colon", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1eth1, r2:eth1]
`, `topo.yaml:6: links[0].endpoints[0]: "r1eth1" is not an endpoint; write NODE:IFNAME, e.g. r1:eth1`},
	{"endpoint without interface", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, "r2:"]
`, `topo.yaml:6: links[0].endpoints[1]: "r2:" is not an endpoint; write NODE:IFNAME, e.g. r1:eth1`},
	{"link with one endpoint", `name: t
nodes:
  r1:
links:
  - name: stub
    endpoints: [r1:eth1]
`, `topo.yaml:6: links[0].endpoints: a link needs at least two endpoints; list two endpoints for a point-to-point link, more for a LAN`},
	{"link without endpoints", `name: t
nodes:
  r1:
links:
  - name: stub
`, "topo.yaml:5: links[0].endpoints: missing; list the interfaces the link joins, e.g. `endpoints: [r1:eth1, r2:eth1]`"},

	// Addresses.
	{"malformed IPv4 address", `name: t
nodes:
  r1:
    addresses:
      eth1: [10.0.0.1/24, 10.0.0.300/24]
`, `topo.yaml:5: nodes.r1.addresses.eth1[1]: "10.0.0.300/24" is not an address with a prefix length; write it in CIDR form, e.g. 10.0.0.1/24 or fd00::1/64
topo.yaml:5: nodes.r1.addresses.eth1: no link has this interface as an endpoint; add a link with endpoint r1:eth1, or remove these addresses`},
	{"IPv4 address without prefix length", `name: t
nodes:
  r1:
    addresses:
      eth1: [10.0.0.1]
`, `topo.yaml:5: nodes.r1.addresses.eth1[0]: "10.0.0.1" is not an address with a prefix length; write it in CIDR form, e.g. 10.0.0.1/24 or fd00::1/64
topo.yaml:5: nodes.r1.addresses.eth1: no link has this interface as an endpoint; add a link with endpoint r1:eth1, or remove these addresses`},
	{"IPv4 prefix too long", `name: t
nodes:
  r1:
    addresses:
      eth1: [10.0.0.1/33]
`, `topo.yaml:5: nodes.r1.addresses.eth1[0]: "10.0.0.1/33" is not an address with a prefix length; write it in CIDR form, e.g. 10.0.0.1/24 or fd00::1/64
topo.yaml:5: nodes.r1.addresses.eth1: no link has this interface as an endpoint; add a link with endpoint r1:eth1, or remove these addresses`},
	{"malformed IPv6 address", `name: t
nodes:
  r1:
    addresses:
      eth1:
        - fd00::1/64
        - fd00:::2/64
`, `topo.yaml:5: nodes.r1.addresses.eth1: no link has this interface as an endpoint; add a link with endpoint r1:eth1, or remove these addresses
topo.yaml:7: nodes.r1.addresses.eth1[1]: "fd00:::2/64" is not an address with a prefix length; write it in CIDR form, e.g. 10.0.0.1/24 or fd00::1/64`},
	{"IPv6 prefix too long", `name: t
nodes:
  r1:
    addresses:
      lo: [fd00::1/129]
`, `topo.yaml:5: nodes.r1.addresses.lo[0]: "fd00::1/129" is not an address with a prefix length; write it in CIDR form, e.g. 10.0.0.1/24 or fd00::1/64`},
	{"addresses for an interface no link uses", `name: t
nodes:
  r1:
    addresses:
      lo: [10.255.0.1/32]
      eth1: [10.0.0.1/24]
      eth9: [10.0.9.1/24]
      eth8: [10.0.8.1/24]
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
`, `topo.yaml:7: nodes.r1.addresses.eth9: no link has this interface as an endpoint; add a link with endpoint r1:eth9, or remove these addresses
topo.yaml:8: nodes.r1.addresses.eth8: no link has this interface as an endpoint; add a link with endpoint r1:eth8, or remove these addresses`},
	{"addresses for an interface given twice", `name: t
nodes:
  r1:
    addresses:
      eth1: [10.0.0.1/24]
      eth1: [10.0.1.1/24]
`, `topo.yaml:5: nodes.r1.addresses.eth1: no link has this interface as an endpoint; add a link with endpoint r1:eth1, or remove these addresses
topo.yaml:6: nodes.r1.addresses.eth1: interface given twice; list all its addresses under one key`},

	// Rates.
	{"rate with a plural unit", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    rate: 10mbits
`, `topo.yaml:7: links[0].rate: "10mbits" is not a rate; write a number and a unit such as 500kbit, 10mbit or 1gbit`},
	{"rate that is a word", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    rate: fast
`, `topo.yaml:7: links[0].rate: "fast" is not a rate; write a number and a unit such as 500kbit, 10mbit or 1gbit`},
	{"zero rate", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    rate: 0mbit
`, `topo.yaml:7: links[0].rate: "0mbit" is not a rate; write a number and a unit such as 500kbit, 10mbit or 1gbit`},
	{"negative rate", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    rate: -1kbit
`, `topo.yaml:7: links[0].rate: "-1kbit" is not a rate; write a number and a unit such as 500kbit, 10mbit or 1gbit`},
	{"rate too small", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    rate: 1bit
`, `topo.yaml:7: links[0].rate: rate "1bit" is out of range; write a number and a unit such as 500kbit, 10mbit or 1gbit`},

	// MTU.
	{"mtu too small", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    mtu: 20
`, `topo.yaml:7: links[0].mtu: "20" is not an MTU; give a whole number from 68 to 65535`},
	{"mtu too big", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    mtu: 65536
`, `topo.yaml:7: links[0].mtu: "65536" is not an MTU; give a whole number from 68 to 65535`},
	{"mtu not a number", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    mtu: 1500.5
`, `topo.yaml:7: links[0].mtu: "1500.5" is not an MTU; give a whole number from 68 to 65535`},

	// Connectors.
	{"unknown connector", `name: t
nodes:
  r1:
  r2:
links:
  - endpoints: [r1:eth1, r2:eth1]
    connector: veth
`, `topo.yaml:7: links[0].connector: unknown connector "veth"; use one of: auto, bridge, lan, shortbridge`},
	{"shortbridge with three endpoints", `name: t
nodes:
  r1:
  r2:
  r3:
links:
  - name: lan
    connector: shortbridge
    endpoints: [r1:eth1, r2:eth1, r3:eth1]
`, "topo.yaml:8: links[0].connector: a shortbridge joins exactly 2 endpoints, not 3; use `connector: bridge` or `connector: lan`"},

	// Files.
	{"file outside the writable directories", `name: t
nodes:
  r1:
    files:
      - path: /usr/local/etc/x.conf
        content: hi
`, `topo.yaml:5: nodes.r1.files[0].path: "/usr/local/etc/x.conf" is not in a node's writable directories; give an absolute file path under /etc, /run, /var/run, /tmp, /var/tmp, /var/log or /var/lib`},
	{"file path climbing out with ..", `name: t
nodes:
  r1:
    files:
      - path: /etc/../usr/x.conf
        content: hi
`, `topo.yaml:5: nodes.r1.files[0].path: "/etc/../usr/x.conf" is not in a node's writable directories; give an absolute file path under /etc, /run, /var/run, /tmp, /var/tmp, /var/log or /var/lib`},
	{"file path ending in ..", `name: t
nodes:
  r1:
    files:
      - content: hi
        path: /tmp/..
`, `topo.yaml:6: nodes.r1.files[0].path: "/tmp/.." is not in a node's writable directories; give an absolute file path under /etc, /run, /var/run, /tmp, /var/tmp, /var/log or /var/lib`},
	{"file path that is a directory", `name: t
nodes:
  r1:
    files:
      - path: /run/
        content: hi
`, `topo.yaml:5: nodes.r1.files[0].path: "/run/" is not in a node's writable directories; give an absolute file path under /etc, /run, /var/run, /tmp, /var/tmp, /var/log or /var/lib`},
	{"relative file path", `name: t
nodes:
  r1:
    files:
      - path: etc/x.conf
        content: hi
`, `topo.yaml:5: nodes.r1.files[0].path: "etc/x.conf" is not in a node's writable directories; give an absolute file path under /etc, /run, /var/run, /tmp, /var/tmp, /var/log or /var/lib`},
	{"file path in a look-alike directory", `name: t
nodes:
  r1:
    files:
      - path: /etcetera/x.conf
        content: hi
`, `topo.yaml:5: nodes.r1.files[0].path: "/etcetera/x.conf" is not in a node's writable directories; give an absolute file path under /etc, /run, /var/run, /tmp, /var/tmp, /var/log or /var/lib`},
	{"file with content and source", `name: t
nodes:
  r1:
    files:
      - path: /etc/x.conf
        content: hi
        source: x.conf
`, `topo.yaml:7: nodes.r1.files[0].source: both content and source given; keep one of them`},
	{"file with neither content nor source", `name: t
nodes:
  r1:
    files:
      - path: /etc/x.conf
`, "topo.yaml:5: nodes.r1.files[0]: neither content nor source given; add `content: |` with the text, or `source: path/relative/to/topology`"},
	{"file source that does not exist", `name: t
nodes:
  r1:
    files:
      - path: /etc/x.conf
        source: no-such-file.conf
`, `topo.yaml:6: nodes.r1.files[0].source: cannot read no-such-file.conf: stat no-such-file.conf: no such file or directory; give a path relative to the topology file`},

	// Sysctls.
	{"non-net sysctl", `name: t
nodes:
  r1:
    sysctl:
      net.ipv4.ip_forward: 0
      kernel.panic: 1
`, `topo.yaml:6: nodes.r1.sysctl.kernel.panic: only net.* sysctls belong to a node; remove it, or name a net.* sysctl such as net.ipv4.ip_forward`},
	{"sysctl climbing out of net", `name: t
nodes:
  r1:
    sysctl:
      net/../kernel/panic: 1
`, `topo.yaml:5: nodes.r1.sysctl.net/../kernel/panic: only net.* sysctls belong to a node; remove it, or name a net.* sysctl such as net.ipv4.ip_forward`},
	{"sysctl given twice", `name: t
nodes:
  r1:
    sysctl:
      net.ipv4.ip_forward: 0
      net.ipv4.ip_forward: 1
`, `topo.yaml:6: nodes.r1.sysctl.net.ipv4.ip_forward: sysctl given twice; keep only one`},

	// Not a topology at all.
	// yaml.v3 names the right line for scanner errors like these; for parser errors (an
	// unclosed bracket) it can name the line before, so no such case is pinned here.
	{"not YAML", `name: t
nodes:
  r1: addresses: {}
`, `topo.yaml:3: (file): not valid YAML: mapping values are not allowed in this context; check the indentation (spaces, not tabs), colons, brackets and quoting near this line`},
	{"tab indentation", "name: t\nnodes:\n\tr1:\n",
		`topo.yaml:3: (file): not valid YAML: found character that cannot start any token; check the indentation (spaces, not tabs), colons, brackets and quoting near this line`},
	{"control character", "name: t\x01\n",
		`topo.yaml: (file): not valid YAML: control characters are not allowed; check the indentation (spaces, not tabs), colons, brackets and quoting near this line`},
	{"plain text", `this is not a topology
`, `topo.yaml:1: (file): expected a mapping with the keys name, nodes and links; see the topology file reference in README.md`},
	{"a list, not a mapping", `- name: t
`, `topo.yaml:1: (file): expected a mapping with the keys name, nodes and links; see the topology file reference in README.md`},
	{"empty file", ``, `topo.yaml: (file): the file is empty; write a network with name, nodes and links`},
	{"only comments", `# a topology, one day
`, `topo.yaml: (file): the file is empty; write a network with name, nodes and links`},
	{"nodes not a mapping", `name: t
nodes: [r1, r2]
`, "topo.yaml:2: nodes: expected a mapping from node name to node; write `nodes:` then `  r1: {}` lines"},
	{"links not a list", `name: t
nodes:
  r1:
links:
  endpoints: [r1:eth1]
`, "topo.yaml:5: links: expected a list of links; write each link as `- endpoints: [a:eth1, b:eth1]`"},
}

// Each case's want lists every problem of its file, one per line, as Errors.Error writes them.
func TestParseErrors(t *testing.T) {
	for _, tc := range parseErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, tc.doc, strings.Split(tc.want, "\n"))
		})
	}
}

// checkErrors parses doc and checks that Parse returns Errors with exactly the problems want,
// in that order (by line), each an *Error naming the file.
func checkErrors(t *testing.T, doc string, want []string) {
	t.Helper()
	n, err := Parse("topo.yaml", []byte(doc))
	if err == nil {
		t.Fatalf("Parse succeeded (%d nodes, %d links); want errors\n%s", len(n.Nodes), len(n.Links), strings.Join(want, "\n"))
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is %T, want spec.Errors: %v", err, err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Error())
		if e.File != "topo.yaml" {
			t.Errorf("Error.File = %q, want topo.yaml", e.File)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("wrong errors\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	if err.Error() != strings.Join(want, "\n") {
		t.Errorf("Errors.Error() = %q, want the problems one per line", err.Error())
	}
	var first *Error
	if !errors.As(err, &first) || first != es[0] {
		t.Errorf("errors.As(err, *Error) = %v, want the first problem %v", first, es[0])
	}
}

// The same file must always give the same errors, in the same order, whatever Go's map order.
func TestParseErrorsAreStable(t *testing.T) {
	doc := `name: t
nodes:
  r1:
    addresses:
      eth5: [10.0.5.1/24]
      eth4: [10.0.4.1/24]
      eth3: [10.0.3.1/24]
      eth2: [10.0.2.1/24]
`
	var want []string
	for i, ifname := range []string{"eth5", "eth4", "eth3", "eth2"} {
		want = append(want, fmt.Sprintf("topo.yaml:%d: nodes.r1.addresses.%s: no link has this interface as an endpoint; add a link with endpoint r1:%s, or remove these addresses", 5+i, ifname, ifname))
	}
	for range 50 {
		checkErrors(t, doc, want)
		if t.Failed() {
			return
		}
	}
}

func TestParseValid(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	const birdConf = "router id 10.0.0.1;\n"
	if err := os.WriteFile(filepath.Join(dir, "conf", "bird.conf"), []byte(birdConf), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := `# A small lab.
name: lab1
nodes:
  r2:
    addresses:
      eth1: [10.0.0.2/24, "fd00::2/64"]
      lo: [10.255.0.2/32]
    sysctl:
      net.ipv4.ip_forward: 0
  r1:
    addresses:
      eth1: [10.0.0.1/24]
      eth2: [10.0.1.1/24]
    exec:
      - bird -c /etc/bird/bird.conf
      - ip route add 10.9.0.0/16 via 10.0.1.3
    files:
      - path: /etc/bird/bird.conf
        source: conf/bird.conf
      - path: /tmp/motd
        content: |
          hello
  h3:
  a-very-long-interface-user:
links:
  - endpoints: [r1:eth1, r2:eth1]
    rate: 10mbit
    mtu: 9000
  - name: lan
    endpoints: [r1:eth2, h3:eth0, a-very-long-interface-user:abcdefghijklmno]
  - endpoints: [r2:eth2, h3:eth1]
    connector: bridge
    rate: 2mbps
`
	path := filepath.Join(dir, "topo.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "lab1" || n.File != path {
		t.Errorf("Name, File = %q, %q; want lab1, %q", n.Name, n.File, path)
	}

	var order []string
	for _, nd := range n.Nodes {
		order = append(order, nd.Name)
	}
	if want := []string{"r2", "r1", "h3", "a-very-long-interface-user"}; !reflect.DeepEqual(order, want) {
		t.Errorf("node order %v, want the file's order %v", order, want)
	}

	r1, r2, h3 := n.Node("r1"), n.Node("r2"), n.Node("h3")
	if r1 == nil || r2 == nil || h3 == nil || n.Node("r9") != nil {
		t.Fatalf("Node lookup: r1=%v r2=%v h3=%v r9=%v", r1, r2, h3, n.Node("r9"))
	}
	if r2.Line != 4 || r1.Line != 10 {
		t.Errorf("node lines r2=%d r1=%d, want 4 and 10", r2.Line, r1.Line)
	}

	// Sysctl defaults fill the gaps; an explicit value wins.
	if want := map[string]string{"net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "1"}; !reflect.DeepEqual(r2.Sysctl, want) {
		t.Errorf("r2 sysctl %v, want %v", r2.Sysctl, want)
	}
	if want := map[string]string{"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.forwarding": "1"}; !reflect.DeepEqual(r1.Sysctl, want) {
		t.Errorf("r1 sysctl %v, want %v", r1.Sysctl, want)
	}
	if want := DefaultSysctl; !reflect.DeepEqual(h3.Sysctl, want) {
		t.Errorf("h3 (declared `h3:` with nothing) sysctl %v, want %v", h3.Sysctl, want)
	}
	if DefaultSysctl["net.ipv4.ip_forward"] != "1" || len(DefaultSysctl) != 2 {
		t.Errorf("DefaultSysctl changed: %v", DefaultSysctl)
	}

	if want := map[string][]string{"eth1": {"10.0.0.2/24", "fd00::2/64"}, "lo": {"10.255.0.2/32"}}; !reflect.DeepEqual(r2.Addresses, want) {
		t.Errorf("r2 addresses %v, want %v", r2.Addresses, want)
	}
	if want := []string{"bird -c /etc/bird/bird.conf", "ip route add 10.9.0.0/16 via 10.0.1.3"}; !reflect.DeepEqual(r1.Exec, want) {
		t.Errorf("r1 exec %q, want %q", r1.Exec, want)
	}
	if want := []File{{Path: "/etc/bird/bird.conf", Content: birdConf}, {Path: "/tmp/motd", Content: "hello\n"}}; !reflect.DeepEqual(r1.Files, want) {
		t.Errorf("r1 files %+v, want %+v", r1.Files, want)
	}

	type linkSummary struct {
		Name, Connector, Endpoints, RateText string
		Rate                                 uint64
		MTU, Line                            int
	}
	var got []linkSummary
	for _, l := range n.Links {
		var eps []string
		for _, e := range l.Endpoints {
			eps = append(eps, e.String())
		}
		got = append(got, linkSummary{l.Name, l.Connector, strings.Join(eps, " "), l.RateText, l.Rate, l.MTU, l.Line})
	}
	want := []linkSummary{
		{"r1:eth1--r2:eth1", Shortbridge, "r1:eth1 r2:eth1", "10mbit", 10e6, 9000, 26},
		{"lan", DefaultLANConnector, "r1:eth2 h3:eth0 a-very-long-interface-user:abcdefghijklmno", "", 0, 0, 29},
		{"h3:eth1--r2:eth2", Bridge, "r2:eth2 h3:eth1", "2mbps", 16e6, 0, 31},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("links\n got %+v\nwant %+v", got, want)
	}
	if e := n.Links[1].Endpoints[1]; e != (Endpoint{Node: "h3", Ifname: "eth0", Line: 30}) {
		t.Errorf("links[1].endpoints[1] = %+v", e)
	}
}

// A relative source is read from the topology file's folder, not the working directory.
func TestParseSourceRelativeToTopology(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "frr.conf"), []byte("hostname r1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "frr.conf")
	doc := `name: t
nodes:
  r1:
    files:
      - path: /etc/frr/frr.conf
        source: frr.conf
      - path: /etc/frr/abs.conf
        source: ` + abs + `
`
	n, err := Parse(filepath.Join(dir, "topo.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []File{{Path: "/etc/frr/frr.conf", Content: "hostname r1\n"}, {Path: "/etc/frr/abs.conf", Content: "hostname r1\n"}}
	if got := n.Node("r1").Files; !reflect.DeepEqual(got, want) {
		t.Errorf("files %+v, want %+v", got, want)
	}

	// The same name next to a topology file in another folder is not found.
	other := t.TempDir()
	_, err = Parse(filepath.Join(other, "topo.yaml"), []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "cannot read "+filepath.Join(other, "frr.conf")) {
		t.Errorf("got %v, want a cannot-read error naming %s", err, filepath.Join(other, "frr.conf"))
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"10mbit", 10e6},
		{"1gbit", 1e9},
		{"500kbit", 500e3},
		{"2mbps", 16e6},
		{"1.5mbit", 1.5e6},
		{"10Mbit", 10e6},
		{"1GBIT", 1e9},
		{" 10mbit ", 10e6},
		{"64bit", 64},
		{"1bps", 8},
		{"1tbit", 1e12},
		{"1kbps", 8e3},
		{"4.1mbit", 4.1e6}, // 4.1*1e6 is 4099999.999... in floating point
		{"1.005kbit", 1005},
		{".5mbit", 5e5},
		{"10.mbit", 10e6},
	} {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"", "fast", "10", "10mbits", "0mbit", "-1kbit", "+1kbit", "1bit", "2tbps",
		"nanmbit", "NaNkbit", "infgbit", "1e3mbit", "0x10mbit", "1_000kbit", "10 mbit", "mbit", ".mbit",
	} {
		if got, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormatRate(t *testing.T) {
	for _, tc := range []struct {
		in   uint64
		want string
	}{
		{10e6, "10mbit"},
		{1500000, "1500kbit"},
		{1e9, "1gbit"},
		{2e12, "2tbit"},
		{500e3, "500kbit"},
		{16e6, "16mbit"},
		{1001, "1001bit"},
		{8, "8bit"},
		{0, "0bit"},
	} {
		if got := FormatRate(tc.in); got != tc.want {
			t.Errorf("FormatRate(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// What FormatRate writes, ParseRate reads back.
	for _, bps := range []uint64{8, 1001, 1500000, 10e6, 1e9, 2e12} {
		if got, err := ParseRate(FormatRate(bps)); err != nil || got != bps {
			t.Errorf("ParseRate(FormatRate(%d)) = %d, %v", bps, got, err)
		}
	}
}

func TestFileModeOwner(t *testing.T) {
	doc := `name: t
nodes:
  r1:
    files:
      - {path: /etc/a, content: a, mode: 0o640, owner: "frr:frr"}
      - {path: /var/lib/frr/b, content: b, mode: 600, owner: "100"}
      - {path: /etc/c, content: c}
`
	n, err := Parse("topo.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []File{{Path: "/etc/a", Content: "a", Mode: 0o640, Owner: "frr:frr"},
		{Path: "/var/lib/frr/b", Content: "b", Mode: 0o600, Owner: "100"}, {Path: "/etc/c", Content: "c"}}
	if got := n.Node("r1").Files; !reflect.DeepEqual(got, want) {
		t.Errorf("files %+v, want %+v", got, want)
	}
}
