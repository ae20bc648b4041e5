//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// frrOwnConf is the frr.conf of router rN of the ownership tests: every address of the router
// is here, none in the topology file (as in FRR's topotests and most containerlab labs), so
// zebra puts them on the interfaces. ifs maps an interface to its addresses and OSPF network
// type ("broadcast" on the LAN, "point-to-point" on the point-to-point link).
func frrOwnConf(n int, ifs map[string][2]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "frr defaults traditional\nhostname r%d\nlog file /var/log/frr/frr.log\nservice integrated-vtysh-config\n!\n", n)
	fmt.Fprintf(&b, "interface lo\n ip address 10.255.0.%d/32\n ipv6 address fd00:255::%d/128\n ip ospf area 0\n ipv6 ospf6 area 0\n!\n", n, n)
	for _, name := range slices.Sorted(maps.Keys(ifs)) {
		addrs, typ := strings.Fields(ifs[name][0]), ifs[name][1]
		fmt.Fprintf(&b, "interface %s\n ip address %s\n ipv6 address %s\n", name, addrs[0], addrs[1])
		fmt.Fprintf(&b, " ip ospf area 0\n ip ospf network %s\n ip ospf hello-interval 1\n ip ospf dead-interval 4\n", typ)
		fmt.Fprintf(&b, " ipv6 ospf6 area 0\n ipv6 ospf6 network %s\n ipv6 ospf6 hello-interval 1\n ipv6 ospf6 dead-interval 4\n!\n", typ)
	}
	fmt.Fprintf(&b, "router ospf\n ospf router-id 10.255.0.%d\n!\nrouter ospf6\n ospf6 router-id 10.255.0.%d\n!\n", n, n)
	return b.String()
}

// frrOwnTopo is the ownership tests' network: routers r1, r2, r3 on the LAN s3, r1 and r2
// also on the point-to-point link p12 (rate p12Rate), every router address in frr.conf; and
// h1, h2 on the link h12, with h1's eth1 addresses from the file (h1Addrs); with h3, a node
// h3 on the LAN too.
func frrOwnTopo(p12Rate, h1Addrs string, h3 bool) string {
	var b strings.Builder
	b.WriteString("name: frrown\nnodes:\n")
	for n := 1; n <= 3; n++ {
		fmt.Fprintf(&b, "  r%d:\n    files:\n", n)
		fmt.Fprintf(&b, "      - {path: /etc/frr/daemons, source: daemons, owner: \"frr:frr\", mode: \"0640\"}\n")
		fmt.Fprintf(&b, "      - {path: /etc/frr/frr.conf, source: r%d.conf, owner: \"frr:frr\", mode: \"0640\"}\n", n)
		fmt.Fprintf(&b, "      - {path: /var/log/frr/frr.log, content: \"\", owner: \"frr:frr\", mode: \"0640\"}\n")
		fmt.Fprintf(&b, "    exec:\n      - /usr/lib/frr/frrinit.sh start\n")
	}
	fmt.Fprintf(&b, "  h1:\n    addresses:\n      eth1: [%s]\n  h2:\n    addresses:\n      eth1: [10.0.9.2/24]\n", h1Addrs)
	members := "r1:r1-eth1, r2:r2-eth1, r3:r3-eth0"
	if h3 {
		b.WriteString("  h3:\n    addresses:\n      eth1: [10.0.123.9/24]\n")
		members += ", h3:eth1"
	}
	b.WriteString("links:\n")
	fmt.Fprintf(&b, "  - {name: s3, endpoints: [%s]}\n", members)
	fmt.Fprintf(&b, "  - {name: p12, endpoints: [r1:r1-eth2, r2:r2-eth2], rate: %s}\n", p12Rate)
	b.WriteString("  - {name: h12, endpoints: [h1:eth1, h2:eth1]}\n")
	return b.String()
}

// nodeState is what a node holds that a live change must leave alone: every interface's
// addresses (with its index, so a re-created interface shows), every route of the kernel,
// and a router's OSPF and OSPFv3 routing tables, qdiscs and nft rules.
type nodeState struct {
	Addrs  map[string][]string // "ifname#ifindex" -> addresses
	Routes []string
	OSPF   []string
	Own    []string // a router's qdiscs and nft ruleset (routerOwn)
}

// nhid is the id of a route's nexthop object, which zebra numbers anew as it installs a route.
var nhid = regexp.MustCompile(` nhid [0-9]+`)

// age is the age of a route in vtysh's tables.
var age = regexp.MustCompile(`[0-9]+:[0-9]+:[0-9]+`)

// readNodeState reads a node's interfaces, addresses and routes (IPv4 and IPv6, every table).
func readNodeState(t *testing.T, state, network, node string) nodeState {
	t.Helper()
	var ifs []struct {
		Ifname   string `json:"ifname"`
		Ifindex  int    `json:"ifindex"`
		AddrInfo []struct {
			Local     string `json:"local"`
			Prefixlen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(mustExec(t, state, network, node, "ip", "-j", "addr", "show")), &ifs); err != nil {
		t.Fatalf("%s: ip -j addr: %v", node, err)
	}
	s := nodeState{Addrs: map[string][]string{}}
	for _, i := range ifs {
		key := fmt.Sprintf("%s#%d", i.Ifname, i.Ifindex)
		s.Addrs[key] = []string{}
		for _, a := range i.AddrInfo {
			s.Addrs[key] = append(s.Addrs[key], fmt.Sprintf("%s/%d", a.Local, a.Prefixlen))
		}
		slices.Sort(s.Addrs[key])
	}
	for _, fam := range []string{"-4", "-6"} {
		out := mustExec(t, state, network, node, "ip", fam, "route", "show", "table", "all")
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			s.Routes = append(s.Routes, nhid.ReplaceAllString(strings.Join(strings.Fields(l), " "), ""))
		}
	}
	slices.Sort(s.Routes)
	if strings.HasPrefix(node, "r") {
		for _, c := range []string{"show ip ospf route", "show ipv6 ospf6 route"} {
			for _, l := range strings.Split(mustExec(t, state, network, node, "vtysh", "-c", c), "\n") {
				// OSPFv3's best routes only: ospf6d may keep others it no longer uses.
				if c == "show ip ospf route" || strings.HasPrefix(l, "*") {
					s.OSPF = append(s.OSPF, strings.Join(strings.Fields(age.ReplaceAllString(l, "")), " "))
				}
			}
		}
		slices.Sort(s.OSPF) // nexthops come in any order
		s.Own = strings.Split(mustExec(t, state, network, node, "sh", "-c", "tc qdisc show && nft list ruleset"), "\n")
	}
	return s
}

func readAll(t *testing.T, state string, nodes []string) map[string]nodeState {
	out := map[string]nodeState{}
	for _, n := range nodes {
		out[n] = readNodeState(t, state, "frrown", n)
	}
	return out
}

// sameState reports how got differs from want (nil: not at all), node by node; the kernel's
// routes only if kernel.
func sameState(want, got map[string]nodeState, kernel bool) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(want)) {
		w, g := want[n], got[n]
		for _, k := range slices.Sorted(maps.Keys(w.Addrs)) {
			if !slices.Equal(w.Addrs[k], g.Addrs[k]) {
				out = append(out, fmt.Sprintf("%s %s: addresses %v, were %v", n, k, g.Addrs[k], w.Addrs[k]))
			}
		}
		for k := range g.Addrs {
			if _, ok := w.Addrs[k]; !ok {
				out = append(out, fmt.Sprintf("%s: interface %s is new", n, k))
			}
		}
		if !slices.Equal(w.OSPF, g.OSPF) {
			out = append(out, fmt.Sprintf("%s: OSPF routes\n  %s\nwere\n  %s", n, strings.Join(g.OSPF, "\n  "), strings.Join(w.OSPF, "\n  ")))
		}
		if !slices.Equal(w.Own, g.Own) {
			out = append(out, fmt.Sprintf("%s: qdiscs and nft rules\n  %s\nwere\n  %s", n, strings.Join(g.Own, "\n  "), strings.Join(w.Own, "\n  ")))
		}
		if kernel && !slices.Equal(w.Routes, g.Routes) {
			out = append(out, fmt.Sprintf("%s: routes\n  %s\nwere\n  %s", n, strings.Join(g.Routes, "\n  "), strings.Join(w.Routes, "\n  ")))
		}
	}
	return out
}

// reconverge bounds how long the routers take to be as before once the LAN's cable (or one
// member's) is back, or its interfaces reset (an MTU change), which may change the LAN's
// designated router (it does, in this test's cable steps). The old DR flushes its
// network and intra-area-prefix LSAs (age MaxAge), and ospf6d keeps their route to the LAN's
// prefix, next to the new one, until it removes them from its database: `show ipv6 ospf6
// route` lists the prefix twice meanwhile (seen here 0.3 to 4.9 s after up with a MaxAge LSA
// of r2's still in r2's database; in CI, 40 s and more). ospf6d removes MaxAge LSAs on a
// timer of OSPF_LSA_MAXAGE_REMOVE_DELAY_DEFAULT (60 s, FRR's lib/libospf.h), armed by an
// earlier flush, and arms it again for 60 s if then a neighbour still has to acknowledge one
// or is exchanging databases. So: twice 60 s, one retransmit interval (5 s) for the last
// acknowledgement, one SPF hold (5 s), and 10 s for reads of every node on a loaded machine.
// waitState returns as soon as the routers are as before (seconds, mostly).
const reconverge = 140 * time.Second

// waitState waits until every node holds want again (the routers reconverged), or fails.
func waitState(t *testing.T, state string, want map[string]nodeState, kernel bool, within time.Duration, what string) {
	t.Helper()
	began := time.Now()
	deadline := began.Add(within)
	for {
		diff := sameState(want, readAll(t, state, slices.Collect(maps.Keys(want))), kernel)
		if diff == nil {
			t.Logf("%s: as before after %.1fs", what, time.Since(began).Seconds())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not as before after %s:\n%s", what, within, strings.Join(diff, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestFRROwnership checks that trellis leaves alone what stock FRR made inside the routers
// (addresses from frr.conf, put there by zebra; the routes of OSPF) and what was set in them
// by hand (qdiscs, nft rules): pulling one member's cable off a 3-router LAN and plugging it
// back, changing a point-to-point link's rate, a node next to the routers added, restarted and
// removed, a capture, `up` of an unchanged file and a change of two links' MTU change no
// address of any interface, the routers reconverge within OSPF's timers, and a node's
// file-given addresses change as the file does while an address its own software added, and
// the state and sysctls it set on the interface, stay.
func TestFRROwnership(t *testing.T) {
	if _, err := exec.LookPath("/usr/lib/frr/zebra"); err != nil {
		t.Fatalf("FRR is not installed (%v): scripts/setup.sh installs frr", err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	dir := t.TempDir()
	daemons, err := os.ReadFile(filepath.Join(root, "examples/frr-ospf/daemons"))
	if err != nil {
		t.Fatal(err)
	}
	lan := map[int]string{1: "r1-eth1", 2: "r2-eth1", 3: "r3-eth0"}
	files := map[string]string{"daemons": string(daemons)}
	for n := 1; n <= 3; n++ {
		ifs := map[string][2]string{lan[n]: {fmt.Sprintf("10.0.123.%d/24 fd00:123::%d/64", n, n), "broadcast"}}
		if n < 3 {
			ifs[fmt.Sprintf("r%d-eth2", n)] = [2]string{fmt.Sprintf("10.0.12.%d/24 fd00:12::%d/64", n, n), "point-to-point"}
		}
		files[fmt.Sprintf("r%d.conf", n)] = frrOwnConf(n, ifs)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	topo := filepath.Join(dir, "frrown.yaml")
	rewriteTopo(t, topo, frrOwnTopo("100mbit", "10.0.9.1/24", false))
	mustTrellis(t, e.state, "up", topo)

	routers, nodes := []string{"r1", "r2", "r3"}, []string{"r1", "r2", "r3", "h1", "h2"}
	converged := waitOSPF(t, e.state, routers)
	routerOwn(t, e.state)
	base := readAll(t, e.state, nodes)
	for n := 1; n <= 3; n++ { // zebra put the addresses of frr.conf there
		if a := base[fmt.Sprintf("r%d", n)].Addrs; !hasAddr(a, lan[n], fmt.Sprintf("10.0.123.%d/24", n)) || !hasAddr(a, lan[n], fmt.Sprintf("fd00:123::%d/64", n)) {
			t.Fatalf("r%d: zebra's LAN addresses are missing before any change: %v", n, a)
		}
	}
	t.Logf("converged in %.1fs", converged.Seconds())

	// (b) A point-to-point link's rate changed in the file: nothing inside any node changes.
	rewriteTopo(t, topo, frrOwnTopo("50mbit", "10.0.9.1/24", false))
	mustTrellis(t, e.state, "up", topo)
	time.Sleep(6 * time.Second)
	if diff := sameState(base, readAll(t, e.state, nodes), true); diff != nil {
		t.Errorf("rate of p12 100mbit -> 50mbit changed the nodes:\n%s", strings.Join(diff, "\n"))
		base = readAll(t, e.state, nodes) // to see what the next step does by itself
	}
	// An impairment of what r1 sends on p12, added and removed: nothing inside any node changes.
	for _, imp := range []string{"loss: 2%, duplicate: 1%", ""} {
		rewriteTopo(t, topo, frrOwnTopoWith("50mbit", "10.0.9.1/24", false, frrOwnMore{p12Impair: imp}))
		mustTrellis(t, e.state, "up", topo)
		if diff := sameState(base, readAll(t, e.state, nodes), true); diff != nil {
			t.Errorf("impairment of p12 from r1 %q changed the nodes:\n%s", imp, strings.Join(diff, "\n"))
			base = readAll(t, e.state, nodes)
		}
	}

	// A node added to the LAN next to the routers, restarted (a sysctl of its own changed),
	// and removed: nothing inside the routers changes.
	for _, h3 := range []struct{ on, forward bool }{{true, false}, {true, true}, {false, false}} {
		rewriteTopo(t, topo, frrOwnTopoWith("50mbit", "10.0.9.1/24", h3.on, frrOwnMore{h3Forward: h3.forward}))
		mustTrellis(t, e.state, "up", topo)
		if diff := sameState(base, readAll(t, e.state, nodes), true); diff != nil {
			t.Errorf("h3 on the LAN (%v, restarted %v) changed the nodes:\n%s", h3.on, h3.forward, strings.Join(diff, "\n"))
			base = readAll(t, e.state, nodes)
		}
	}
	// A capture of the LAN and of one end of p12, and `up` of the unchanged file, change
	// nothing inside any node.
	checkCapture(t, e.state, base, nodes)
	checkUnchangedUp(t, e.state, topo)

	// (a) One member's cable pulled off the LAN: no address anywhere changes; r1 and r2 keep
	// each other, and lose r3's loopback until the cable is back.
	mustTrellis(t, e.state, "link", "frrown", "s3", "down", "--endpoint", "r3:r3-eth0")
	time.Sleep(6 * time.Second) // past OSPF's dead interval
	// The port went down, not r3's interface: it is still up, without a carrier.
	if out := mustExec(t, e.state, "frrown", "r3", "ip", "-o", "link", "show", "r3-eth0"); !strings.Contains(out, "NO-CARRIER") || !strings.Contains(out, ",UP") {
		t.Errorf("link s3 down --endpoint r3:r3-eth0: r3-eth0 is not up without a carrier: %s", out)
	}
	now := readAll(t, e.state, nodes)
	for _, n := range nodes {
		if !maps.EqualFunc(base[n].Addrs, now[n].Addrs, slices.Equal[[]string]) {
			t.Errorf("link s3 down --endpoint r3:r3-eth0: %s's addresses changed: %v, were %v", n, now[n].Addrs, base[n].Addrs)
		}
	}
	ping(t, e.state, "frrown", "r1", "10.255.0.2")
	// `up` of the same file plugs the cable back: every router gets every route back.
	mustTrellis(t, e.state, "up", topo)
	waitState(t, e.state, base, true, reconverge, "up after link s3 down --endpoint r3:r3-eth0")

	// File-given addresses: one added and one removed from the file change h1 so; the address
	// h1's own software added on the same interface stays; nothing else changes.
	mustExec(t, e.state, "frrown", "h1", "ip", "addr", "add", "10.0.9.50/24", "dev", "eth1")
	mustExec(t, e.state, "frrown", "r1", "ip", "addr", "add", "10.0.12.50/24", "dev", "r1-eth2")
	base = readAll(t, e.state, nodes)
	h1 := ifKey(t, base["h1"].Addrs, "eth1")
	steps := []struct {
		addrs      string
		want, gone []string
	}{
		{"10.0.9.1/24, fd00:9::1/64", []string{"10.0.9.1/24", "fd00:9::1/64", "10.0.9.50/24"}, nil},
		{"fd00:9::1/64", []string{"fd00:9::1/64", "10.0.9.50/24"}, []string{"10.0.9.1/24"}},
	}
	for _, s := range steps {
		rewriteTopo(t, topo, frrOwnTopo("50mbit", s.addrs, false))
		mustTrellis(t, e.state, "up", topo)
		got := readAll(t, e.state, nodes)
		for _, a := range s.want {
			if !slices.Contains(got["h1"].Addrs[h1], a) {
				t.Errorf("h1 eth1 [%s]: %s missing: %v", s.addrs, a, got["h1"].Addrs[h1])
			}
		}
		for _, a := range s.gone {
			if slices.Contains(got["h1"].Addrs[h1], a) {
				t.Errorf("h1 eth1 [%s]: %s (removed from the file) still there: %v", s.addrs, a, got["h1"].Addrs[h1])
			}
		}
		delete(got, "h1")
		others := maps.Clone(base)
		delete(others, "h1")
		if diff := sameState(others, got, true); diff != nil {
			t.Errorf("h1 eth1 [%s] changed other nodes:\n%s", s.addrs, strings.Join(diff, "\n"))
		}
	}
	// A change of addresses changes them alone: not the interface's state or sysctls.
	checkAddressOnly(t, e.state, topo)
	// The whole LAN down and up again, through `link`: the addresses stay and OSPF's routes
	// come back. (The kernel's routes are not compared: when r1-eth1 loses its carrier the
	// kernel takes its nexthop out of the ECMP group of r1's route to r2, and zebra 8.4 puts
	// the group back as it was, believing it whole; a real cable pulled does the same.)
	base = readAll(t, e.state, nodes)
	mustTrellis(t, e.state, "link", "frrown", "s3", "down")
	time.Sleep(6 * time.Second)
	mustTrellis(t, e.state, "link", "frrown", "s3", "up")
	waitState(t, e.state, base, false, reconverge, "link s3 down, then up")
	// The MTU of p12 and the LAN changed in the file: live, on the same interfaces.
	checkMTULive(t, e.state, topo, nodes)

	mustTrellis(t, e.state, "down", "frrown")
	e.assertClean()
}

// waitOSPF waits until every router reaches every router's loopback over OSPF and OSPFv3,
// and their routes stay the same for 3 s.
func waitOSPF(t *testing.T, state string, routers []string) time.Duration {
	t.Helper()
	began, deadline := time.Now(), time.Now().Add(60*time.Second)
	for _, r := range routers {
		for n := 1; n <= len(routers); n++ {
			for _, lo := range []string{fmt.Sprintf("10.255.0.%d", n), fmt.Sprintf("fd00:255::%d", n)} {
				for {
					out, _, err := execIn(t, state, "frrown", r, "ip", "route", "get", lo)
					if err == nil && !strings.Contains(out, "unreachable") {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s has no route to %s after 60 s: %s", r, lo, out)
					}
					time.Sleep(250 * time.Millisecond)
				}
			}
		}
	}
	for prev := readAll(t, state, routers); ; { // until the last SPF runs have settled
		time.Sleep(3 * time.Second)
		now := readAll(t, state, routers)
		if sameState(prev, now, true) == nil {
			return time.Since(began)
		}
		if time.Now().After(deadline) {
			t.Fatalf("routes do not settle after 60 s:\n%s", strings.Join(sameState(prev, now, true), "\n"))
		}
		prev = now
	}
}

// ifKey returns the "ifname#ifindex" key of interface ifname.
func ifKey(t *testing.T, addrs map[string][]string, ifname string) string {
	t.Helper()
	for k := range addrs {
		if strings.HasPrefix(k, ifname+"#") {
			return k
		}
	}
	t.Fatalf("no interface %s in %v", ifname, addrs)
	return ""
}

func hasAddr(addrs map[string][]string, ifname, addr string) bool {
	for k, v := range addrs {
		if strings.HasPrefix(k, ifname+"#") && slices.Contains(v, addr) {
			return true
		}
	}
	return false
}
