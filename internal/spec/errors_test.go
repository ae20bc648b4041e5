package spec

import (
	"errors"
	"testing"
)

// Files with several problems: each is reported, once, in line order; a part that cannot be
// read is one problem, not one more per place that refers to it.
var multiErrorCases = []struct {
	name string
	doc  string
	want []string
}{
	{"problems in every section", `name: my lab
hosts:
  m1: {address: 198.18.0.300}
  m2: {address: 198.18.0.2, mtu: 100}
tunnel: gre
nodes:
  r1:
    kind: jail
    host: m9
    addresses:
      eth1: [10.0.0.1]
  r2:
    sysctl:
      kernel.panic: 1
links:
  - endpoints: [r1:eth1, r3:eth1]
    rate: fast
    mtu: 10
    state: sideways
    loss: 200%
  - endpoints: [r1:eth1, r2:averyveryverylongname]
    connector: veth
`, []string{
		`topo.yaml:1: name: "my lab" is not a valid name; use letters, digits, '-' and '_', starting with a letter or digit, at most 40 characters`,
		`topo.yaml:3: hosts.m1.address: "198.18.0.300" is not an IPv4 address; write the machine's underlay IPv4 address without a prefix length, e.g. 198.18.0.1`,
		`topo.yaml:4: hosts.m2.mtu: "100" is not an MTU; give the underlay MTU, a whole number from 576 to 65535`,
		`topo.yaml:5: tunnel: unknown tunnel "gre"; use one of: egre, vxlan`,
		`topo.yaml:8: nodes.r1.kind: unknown node kind "jail"; use one of: container, vm`,
		"topo.yaml:9: nodes.r1.host: no host named \"m9\"; name one of the hosts under `hosts:`, or remove `host:` to let trellis place the node",
		`topo.yaml:11: nodes.r1.addresses.eth1[0]: "10.0.0.1" is not an address with a prefix length; write it in CIDR form, e.g. 10.0.0.1/24 or fd00::1/64`,
		`topo.yaml:14: nodes.r2.sysctl.kernel.panic: only net.* sysctls belong to a node; remove it, or name a net.* sysctl such as net.ipv4.ip_forward`,
		`topo.yaml:16: links[0].endpoints[1]: no node named "r3"; declare it under nodes, or correct the name`,
		`topo.yaml:17: links[0].rate: "fast" is not a rate; write a number and a unit such as 500kbit, 10mbit or 1gbit`,
		`topo.yaml:18: links[0].mtu: "10" is not an MTU; give a whole number from 68 to 65535`,
		`topo.yaml:19: links[0].state: "sideways" is not a link state; write up or down`,
		"topo.yaml:20: links[0].loss: \"200%\" is not a percentage from 0% to 100%; write a percentage, optionally followed by a correlation percentage: `loss: 10%` or `loss: 10% 25%`",
		`topo.yaml:21: links[1].endpoints[0]: interface r1:eth1 is already used by links[0]; give this endpoint another interface name`,
		`topo.yaml:21: links[1].endpoints[1]: interface name "averyveryverylongname" is longer than 15 characters; use a name of 1 to 15 letters, digits, '-', '_' or '.', such as eth1`,
		`topo.yaml:22: links[1].connector: unknown connector "veth"; use one of: auto, bridge, lan, shortbridge`,
	}},
	{"unknown keys do not hide the rest", `name: t
nodse:
  r1:
nodes:
  r1:
    adresses: {}
    sysctl:
      net.ipv4.ip_forward: [1]
links:
  - endpoints: [r1:eth1]
    speed: 1mbit
`, []string{
		`topo.yaml:2: nodse: unknown key; the keys allowed here are [name hosts tunnel secret nodes links]`,
		`topo.yaml:6: nodes.r1.adresses: unknown key; the keys allowed here are [kind host addresses exec files sysctl cpu memory cpuset pids vm engines dispatch rootfs image entrypoint cmd env keep-entrypoint dataplane]`,
		"topo.yaml:8: nodes.r1.sysctl.net.ipv4.ip_forward: expected a single value; write e.g. `net.ipv4.ip_forward: 0`",
		`topo.yaml:10: links[0].endpoints: a link needs at least two endpoints; list two endpoints for a point-to-point link, more for a LAN`,
		`topo.yaml:11: links[0].speed: unknown key; the keys allowed here are [name endpoints rate mtu connector state table ageing loss duplicate corrupt delay jitter distribution from]`,
	}},
	{"nodes unreadable: endpoints are not each reported", `name: t
nodes: [r1, r2]
links:
  - endpoints: [r1:eth1, r2:eth1]
  - endpoints: [r1:eth2, r2:eth2]
    rate: 1
`, []string{
		"topo.yaml:2: nodes: expected a mapping from node name to node; write `nodes:` then `  r1: {}` lines",
		`topo.yaml:6: links[1].rate: "1" is not a rate; write a number and a unit such as 500kbit, 10mbit or 1gbit`,
	}},
	{"links unreadable: addresses are not each reported", `name: t
nodes:
  r1:
    addresses:
      eth1: [10.0.0.1/24]
links:
  endpoints: [r1:eth1]
`, []string{
		"topo.yaml:7: links: expected a list of links; write each link as `- endpoints: [a:eth1, b:eth1]`",
	}},
	{"an unreadable endpoint is one problem", `name: t
nodes:
  r1:
    addresses:
      eth1: [10.0.0.1/24]
  r2:
links:
  - endpoints: [r1eth1, r2:eth1]
    from:
      r2:eth1: {loss: 1%}
`, []string{
		`topo.yaml:8: links[0].endpoints[0]: "r1eth1" is not an endpoint; write NODE:IFNAME, e.g. r1:eth1`,
	}},
	{"hosts unreadable: node hosts are not each reported", `name: t
hosts: [m1, m2]
nodes:
  r1: {host: m1}
  r2: {host: m2, kind: jail}
`, []string{
		"topo.yaml:2: hosts: expected a mapping from machine name to machine; write e.g. `m1: {address: 198.18.0.1}`",
		`topo.yaml:5: nodes.r2.kind: unknown node kind "jail"; use one of: container, vm`,
	}},
	{"one line, several problems", `name: t
nodes: {r1: {kind: x, host: m1, exec: x}}
`, []string{
		"topo.yaml:2: nodes.r1.exec: expected a list; write `[a, b]` or one `- item` per line",
		"topo.yaml:2: nodes.r1.host: no host named \"m1\"; add a `hosts:` section listing the machines, or remove `host:`",
		`topo.yaml:2: nodes.r1.kind: unknown node kind "x"; use one of: container, vm`,
	}},
	{"limits", `name: t
nodes:
  r1: {cpuset: "0-", pids: 3}
  r2: {cpuset: "3-1", pids: many}
  r3: {cpuset: "0-1,3", pids: 64, cpu: 0.5, memory: 64M}
`, []string{
		`topo.yaml:3: nodes.r1.cpuset: "0-" is not a list of cores; list core numbers and ranges as the kernel does, e.g. 0-1,3`,
		`topo.yaml:3: nodes.r1.pids: "3" is not a process limit; give a whole number from 8 to 4194304, e.g. 512`,
		`topo.yaml:4: nodes.r2.cpuset: "3-1" is not a list of cores; list core numbers and ranges as the kernel does, e.g. 0-1,3`,
		`topo.yaml:4: nodes.r2.pids: "many" is not a process limit; give a whole number from 8 to 4194304, e.g. 512`,
	}},
	{"files: mode and owner", `name: t
nodes:
  r1:
    files:
      - {path: /etc/a, content: a, mode: 0649}
      - {path: /etc/b, content: b, mode: "0"}
      - {path: /etc/c, content: c, mode: 17777}
      - {path: /etc/d, content: d, owner: "Frr"}
      - {path: /etc/e, content: e, owner: "frr:70000"}
      - {path: /etc/f, content: f, owner: "frr:frr:x"}
      - {path: /etc/g, content: g, mode: 0o640, owner: "frr:frr"}
      - {path: /var/lib/frr/h, content: h, mode: 600, owner: "100:102"}
`, []string{
		`topo.yaml:5: nodes.r1.files[0].mode: "0649" is not a file mode; give octal permission bits as chmod takes them, e.g. 0640 or 0755`,
		`topo.yaml:6: nodes.r1.files[1].mode: mode 0 would make the file unreadable even to its owner; give e.g. 0600 for a file only its owner reads`,
		`topo.yaml:7: nodes.r1.files[2].mode: "17777" is not a file mode; give octal permission bits as chmod takes them, e.g. 0640 or 0755`,
		`topo.yaml:8: nodes.r1.files[3].owner: "Frr" is not an owner; write USER or USER:GROUP, names or numbers below 65536, e.g. frr:frr`,
		`topo.yaml:9: nodes.r1.files[4].owner: "frr:70000" is not an owner; write USER or USER:GROUP, names or numbers below 65536, e.g. frr:frr`,
		`topo.yaml:10: nodes.r1.files[5].owner: "frr:frr:x" is not an owner; write USER or USER:GROUP, names or numbers below 65536, e.g. frr:frr`,
	}},
	{"files: every item", `name: t
nodes:
  r1:
    files:
      - path: /usr/x
        content: a
      - content: b
      - path: /etc/y
      - [not, a, file]
`, []string{
		`topo.yaml:5: nodes.r1.files[0].path: "/usr/x" is not in a node's writable directories; give an absolute file path under /etc, /run, /var/run, /tmp, /var/tmp, /var/log or /var/lib`,
		"topo.yaml:7: nodes.r1.files[1].path: missing; say where the file goes inside the node, e.g. `path: /etc/bird/bird.conf`",
		"topo.yaml:8: nodes.r1.files[2]: neither content nor source given; add `content: |` with the text, or `source: path/relative/to/topology`",
		`topo.yaml:9: nodes.r1.files[3]: expected a mapping of keys to values; see the topology file reference in README.md`,
	}},
	{"duplicate names, nodes, hosts and links", `name: t
hosts:
  m1: {address: 198.18.0.1}
  m1: {address: 198.18.0.2}
  m2: {address: 198.18.0.1}
nodes:
  r1:
  r1:
links:
  - name: a
    endpoints: [r1:eth1, r1:eth2]
  - name: a
    endpoints: [r1:eth3, r1:eth4]
`, []string{
		`topo.yaml:4: hosts.m1: duplicate host name; give every host a different name`,
		`topo.yaml:5: hosts.m2.address: host m1 has the same address; give every host its own address`,
		`topo.yaml:8: nodes.r1: duplicate node name; give every node a different name`,
		`topo.yaml:12: links[1].name: duplicate link name "a" (links[0] has it); give every link a different name`,
	}},
}

func TestParseReportsEveryError(t *testing.T) {
	for _, tc := range multiErrorCases {
		t.Run(tc.name, func(t *testing.T) { checkErrors(t, tc.doc, tc.want) })
	}
}

func TestErrorsType(t *testing.T) {
	a := &Error{File: "f.yaml", Line: 3, Field: "links[0].rate", Msg: "bad", Fix: "fix it"}
	b := &Error{File: "f.yaml", Field: "(file)", Msg: "empty"}
	c := &Error{File: "f.yaml", Line: 1, Field: "nodes.a\nb", Msg: "x"}
	es := sortErrors([]*Error{a, b, c})
	want := "f.yaml: (file): empty\nf.yaml:1: nodes.a\\nb: x\nf.yaml:3: links[0].rate: bad; fix it"
	if got := es.Error(); got != want {
		t.Errorf("Errors.Error()\n got %q\nwant %q", got, want)
	}
	if !errors.Is(es, a) || !errors.Is(es, c) {
		t.Errorf("errors.Is does not find each problem in %v", es)
	}
	var first *Error
	if !errors.As(es, &first) || first != b {
		t.Errorf("errors.As gave %v, want the first problem", first)
	}
}
