//go:build integration

package integration

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The property test's network (network "ownprop"): four routers whose daemons configure
// their own addresses and routes, and hosts with file-given addresses.
//
//	r1, r2, r3  stock FRR (zebra, ospfd, ospf6d); every address in frr.conf, none in the file
//	r4          BIRD 2 (OSPFv2 and OSPFv3). BIRD sets no addresses: r4's exec runs its own
//	            script /etc/r4-addrs.sh (ip addr/neigh replace) before bird starts, so its
//	            addresses and a permanent neighbour are the node's software's, as zebra's are;
//	            BIRD adds static blackhole routes (10.254.4.0/24, fd00:254:4::/48) to the
//	            kernel and announces them into OSPF.
//	h1          on the LAN, addresses from the file; its exec adds an address of its own and a
//	            permanent neighbour on the same interface.
//	h2          behind r2 on the point-to-point link p2h, addresses from the file.
//	h9          (added and removed by a step) on the LAN, or on a new link to r4 (r4:eth9).
//
// Links: the LAN "lan" (r1, r2, r3, r4, h1), point-to-point p12 (r1-r2), p34 (r3-r4), p2h
// (r2-h2). Every router has the loopback 10.255.0.N/32 and fd00:255::N/128. OSPF runs with
// hello 1 s and dead 4 s on every interface.
const propNet = "ownprop"

// propRouters are the routers; r4 runs BIRD, the others FRR.
var propRouters = []string{"r1", "r2", "r3", "r4"}

// propLinks are the links of the network with their endpoints (h9's are added by world).
var propLinks = map[string][]string{
	"lan": {"r1:r1-eth1", "r2:r2-eth1", "r3:r3-eth1", "r4:eth1", "h1:eth1"},
	"p12": {"r1:r1-eth2", "r2:r2-eth2"},
	"p34": {"r3:r3-eth2", "r4:eth2"},
	"p2h": {"r2:r2-eth3", "h2:eth1"},
}

// Addresses of h1's and h2's interfaces in the file, and those an address step adds.
var (
	propH1Addrs    = []string{"10.0.100.11/24", "fd00:100::11/64"}
	propH2Addrs    = []string{"10.0.20.2/24", "fd00:20::2/64"}
	propExtraAddrs = map[string][]string{"h1": {"10.0.100.12/24", "fd00:100::12/64"}, "h2": {"10.0.20.12/24", "fd00:20::12/64"}}
)

// propOwnSetup are the commands with which a node's own software configures it (its exec
// lines before any daemon starts): what trellis must leave alone.
var propOwnSetup = map[string][]string{
	"h1": {"ip addr replace 10.0.100.111/24 dev eth1", "ip neigh replace 10.0.100.99 lladdr 02:00:00:00:01:99 dev eth1 nud permanent"},
	"r4": {"sh /etc/r4-addrs.sh"},
}

// world is what the topology file says at a step: each link's rate, MTU and file
// impairment (a line such as "loss: 2%"), the extra file addresses of h1 and h2, and where
// h9 is (nowhere, "lan" or "r4").
type world struct {
	rate   map[string]string
	mtu    map[string]int
	impair map[string]string
	extra  map[string]bool
	h9     string
}

func newWorld() *world {
	return &world{rate: map[string]string{}, mtu: map[string]int{}, impair: map[string]string{}, extra: map[string]bool{}}
}

// endpoints returns a link's endpoints in w (h9's included).
func (w *world) endpoints(link string) []string {
	eps := slices.Clone(propLinks[link])
	if link == "lan" && w.h9 == "lan" {
		eps = append(eps, "h9:eth1")
	}
	return eps
}

// nodesOf returns the nodes of a link's endpoints.
func nodesOf(eps []string) []string {
	var out []string
	for _, ep := range eps {
		out = append(out, strings.SplitN(ep, ":", 2)[0])
	}
	return out
}

// topo renders w as the topology file.
func (w *world) topo() string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nnodes:\n", propNet)
	for _, r := range []string{"r1", "r2", "r3"} {
		fmt.Fprintf(&b, "  %s:\n    files:\n", r)
		b.WriteString("      - {path: /etc/frr/daemons, source: daemons, owner: \"frr:frr\", mode: \"0640\"}\n")
		fmt.Fprintf(&b, "      - {path: /etc/frr/frr.conf, source: %s.conf, owner: \"frr:frr\", mode: \"0640\"}\n", r)
		b.WriteString("      - {path: /var/log/frr/frr.log, content: \"\", owner: \"frr:frr\", mode: \"0640\"}\n")
		b.WriteString("    exec:\n      - /usr/lib/frr/frrinit.sh start\n")
	}
	b.WriteString("  r4:\n    files:\n      - {path: /etc/bird/bird.conf, source: r4-bird.conf}\n")
	b.WriteString("      - {path: /etc/r4-addrs.sh, source: r4-addrs.sh}\n")
	b.WriteString("    exec:\n      - sh /etc/r4-addrs.sh\n      - mkdir -p /run/bird\n      - bird -c /etc/bird/bird.conf -s /run/bird/bird.ctl\n")
	for _, h := range []string{"h1", "h2"} {
		addrs := propH1Addrs
		if h == "h2" {
			addrs = propH2Addrs
		}
		if w.extra[h] {
			addrs = append(slices.Clone(addrs), propExtraAddrs[h]...)
		}
		fmt.Fprintf(&b, "  %s:\n    addresses:\n      eth1: [%s]\n", h, strings.Join(addrs, ", "))
		if cmds := propOwnSetup[h]; cmds != nil {
			fmt.Fprintf(&b, "    exec:\n      - %s\n", strings.Join(cmds, "\n      - "))
		}
	}
	if w.h9 != "" {
		b.WriteString("  h9:\n    addresses:\n      eth1: [10.0.100.19/24]\n")
	}
	b.WriteString("links:\n")
	for _, l := range slices.Sorted(maps.Keys(propLinks)) {
		fmt.Fprintf(&b, "  - name: %s\n    endpoints: [%s]\n", l, strings.Join(w.endpoints(l), ", "))
		if len(w.endpoints(l)) == 2 {
			// Ports always: the property is that of links with ports. A point-to-point link
			// with no connector named and nothing to enforce has none (a direct link), and a
			// rate, impairment or carrier change re-plugs it, its interfaces made anew. Here
			// every interface carries what frr or a host's setup made, so each such step
			// would be refused (decision 15; TestDirectLink tests the refusal): with direct
			// links, the random steps would test refusals instead of live changes next to
			// the nodes' software state, which is what this property is about.
			b.WriteString("    connector: shortbridge\n")
		}
		if r := w.rate[l]; r != "" {
			fmt.Fprintf(&b, "    rate: %s\n", r)
		}
		if m := w.mtu[l]; m != 0 {
			fmt.Fprintf(&b, "    mtu: %d\n", m)
		}
		if p := w.impair[l]; p != "" {
			fmt.Fprintf(&b, "    %s\n", p)
		}
	}
	if w.h9 == "r4" {
		b.WriteString("  - {name: p49, endpoints: [r4:eth9, h9:eth1], connector: shortbridge}\n")
	}
	return b.String()
}

// propFRRConf is router rN's frr.conf: every address is here, none in the topology file, so
// zebra puts them on the interfaces. The point-to-point links cost 5 and the LAN 10, so that
// no route has next hops on two interfaces: zebra 8.4 does not rebuild such a multipath route
// in the kernel after one interface's carrier comes back (TestFRROwnership's note), which is
// FRR's business, not trellis's.
func propFRRConf(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "frr defaults traditional\nhostname r%d\nlog file /var/log/frr/frr.log\nservice integrated-vtysh-config\n!\n", n)
	fmt.Fprintf(&b, "interface lo\n ip address 10.255.0.%d/32\n ipv6 address fd00:255::%d/128\n ip ospf area 0\n ipv6 ospf6 area 0\n!\n", n, n)
	ifs := map[string]string{fmt.Sprintf("r%d-eth1", n): fmt.Sprintf("10.0.100.%d/24 fd00:100::%d/64 broadcast 10", n, n)}
	switch n {
	case 1, 2:
		ifs[fmt.Sprintf("r%d-eth2", n)] = fmt.Sprintf("10.0.12.%d/24 fd00:12::%d/64 point-to-point 5", n, n)
	case 3:
		ifs["r3-eth2"] = "10.0.34.3/24 fd00:34::3/64 point-to-point 5"
	}
	if n == 2 {
		ifs["r2-eth3"] = "10.0.20.1/24 fd00:20::1/64 broadcast 10"
	}
	for _, name := range slices.Sorted(maps.Keys(ifs)) {
		f := strings.Fields(ifs[name])
		fmt.Fprintf(&b, "interface %s\n ip address %s\n ipv6 address %s\n", name, f[0], f[1])
		fmt.Fprintf(&b, " ip ospf area 0\n ip ospf network %s\n ip ospf cost %s\n ip ospf hello-interval 1\n ip ospf dead-interval 4\n", f[2], f[3])
		fmt.Fprintf(&b, " ipv6 ospf6 area 0\n ipv6 ospf6 network %s\n ipv6 ospf6 cost %s\n ipv6 ospf6 hello-interval 1\n ipv6 ospf6 dead-interval 4\n!\n", f[2], f[3])
	}
	fmt.Fprintf(&b, "router ospf\n ospf router-id 10.255.0.%d\n!\nrouter ospf6\n ospf6 router-id 10.255.0.%d\n!\n", n, n)
	return b.String()
}

// propR4Addrs is r4's own address script: what BIRD's node sets itself (idempotent, so that
// running it again restores it).
const propR4Addrs = `set -e
ip addr replace 10.255.0.4/32 dev lo
ip -6 addr replace fd00:255::4/128 dev lo
ip addr replace 10.0.100.4/24 dev eth1
ip -6 addr replace fd00:100::4/64 dev eth1
ip addr replace 10.0.34.4/24 dev eth2
ip -6 addr replace fd00:34::4/64 dev eth2
ip neigh replace 10.0.34.99 lladdr 02:00:00:00:34:99 dev eth2 nud permanent
`

// propBIRDConf is r4's bird.conf: OSPFv2 and OSPFv3 with the FRR routers' timers, its static
// routes announced into OSPF, and every route it learns exported to the kernel (which it
// checks every 2 s, putting back what is missing). OSPFv3 runs
// on no interface without a link-local address, so lo's IPv6 address is announced as an
// external route (protocol direct).
const propBIRDConf = `log "/var/log/bird.log" all;
router id 10.255.0.4;
protocol device { scan time 1; }
protocol kernel k4 { scan time 2; ipv4 { import none; export all; }; }
protocol kernel k6 { scan time 2; ipv6 { import none; export where source != RTS_DEVICE; }; }
protocol direct d6 { ipv6; interface "lo"; }
protocol static s4 { ipv4; route 10.254.4.0/24 blackhole; }
protocol static s6 { ipv6; route fd00:254:4::/48 blackhole; }
protocol ospf v2 o4 {
  ipv4 { import all; export where source = RTS_STATIC; };
  area 0 {
    interface "eth1" { type broadcast; cost 10; hello 1; dead 4; };
    interface "eth2" { type ptp; cost 5; hello 1; dead 4; };
    interface "lo" { stub yes; };
  };
}
protocol ospf v3 o6 {
  ipv6 { import all; export where source = RTS_STATIC || source = RTS_DEVICE; };
  area 0 {
    interface "eth1" { type broadcast; cost 10; hello 1; dead 4; };
    interface "eth2" { type ptp; cost 5; hello 1; dead 4; };
  };
}
`
