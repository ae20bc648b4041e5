//go:build integration

package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// propSnap is what the property test reads inside a node after each step.
//
// Neighbours age, so only what is stable is compared. PERMANENT entries never change by
// themselves: they are compared exactly (ip, lladdr, interface). Entries that answer
// (REACHABLE, STALE, DELAY, PROBE: one state moves to the next as an entry ages and is used)
// come and go by themselves in two ways. A routing daemon makes one whenever it first talks
// to a neighbour unicast (ospf6d retransmitting to a link-local address when LSAs flood after
// a change anywhere), so new entries are allowed. And the kernel's neighbour tables are one
// per machine, shared by every namespace: once all of them together hold more than
// gc_thresh1 (128) entries, which other networks on a shared machine bring about, the kernel
// collects any entry not used for gc_stale_time (60 s). So an entry that answered before a
// step must still be there after it only if it cannot have been collected meanwhile: if it
// was used less than gc_stale_time before the second read. Trellis flushing a node's
// neighbours would take a carrier loss or an interface set down: each interface's carrier
// changes counter, compared exactly, shows either.
type propSnap struct {
	At      time.Time           // when it was read
	Ifs     map[string]propIf   // interface name -> its index, MTU and admin state
	Carrier map[string]string   // interface name -> its carrier changes counter
	Addrs   map[string][]string // interface name -> addresses, sorted
	Routes  []string            // every route of every table, IPv4 and IPv6, sorted
	Perm    []string            // PERMANENT neighbours: "ip lladdr dev"
	Neigh   map[string]int      // neighbours that answer: "ip dev" -> seconds since last used
	OSPF    [][2]string         // a router's OSPFv2 neighbours: router id, state (not compared)
}

// propIf is an interface: Index 0 in an expectation means "any index" (made anew).
type propIf struct {
	Index int
	MTU   int
	Up    bool
}

func (i propIf) String() string { return fmt.Sprintf("#%d mtu %d up=%v", i.Index, i.MTU, i.Up) }

// propRead is the one command that reads a node: its output's parts are split on "@@"; a
// router's OSPFv2 neighbours come last (FRR's vtysh, or BIRD's birdc on r4).
const propRead = `ip -j link show; echo @@; ip -j addr show; echo @@; ip -4 route show table all; echo @@; ip -6 route show table all; echo @@; ip -s -j neigh show nud all; echo @@; grep -H . /sys/class/net/*/carrier_changes; echo @@; `

func propReadCmd(node string) string {
	switch {
	case node == "r4":
		return propRead + "birdc -s /run/bird/bird.ctl show ospf neighbors o4"
	case slices.Contains(propRouters, node):
		return propRead + "vtysh -c 'show ip ospf neighbor'"
	}
	return propRead
}

// expires is the lifetime ip prints for some IPv6 routes, which counts down.
var expires = regexp.MustCompile(` expires [0-9]+sec`)

// readProp reads one node.
func readProp(t *testing.T, state, node string) (propSnap, error) {
	out, errOut, err := execIn(t, state, propNet, node, "sh", "-c", propReadCmd(node))
	if err != nil {
		return propSnap{}, fmt.Errorf("%s: reading the node: %v\n%s", node, err, errOut)
	}
	parts := strings.Split(out, "@@")
	if len(parts) != 7 {
		return propSnap{}, fmt.Errorf("%s: reading the node: %d parts, want 7", node, len(parts))
	}
	var links []struct {
		Ifname  string   `json:"ifname"`
		Ifindex int      `json:"ifindex"`
		MTU     int      `json:"mtu"`
		Flags   []string `json:"flags"`
	}
	var addrs []struct {
		Ifname   string `json:"ifname"`
		AddrInfo []struct {
			Local     string `json:"local"`
			Prefixlen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	var neigh []struct {
		Dst    string   `json:"dst"`
		Dev    string   `json:"dev"`
		Lladdr string   `json:"lladdr"`
		Used   int      `json:"used"`
		State  []string `json:"state"`
	}
	for i, v := range []any{&links, &addrs, &neigh} {
		part := parts[[]int{0, 1, 4}[i]]
		if i == 2 && strings.TrimSpace(part) == "" {
			continue // no neighbours
		}
		if err := json.Unmarshal([]byte(part), v); err != nil {
			return propSnap{}, fmt.Errorf("%s: %v\n%s", node, err, part)
		}
	}
	s := propSnap{At: time.Now(), Ifs: map[string]propIf{}, Carrier: map[string]string{}, Addrs: map[string][]string{}, Neigh: map[string]int{}}
	for _, l := range strings.Fields(parts[5]) { // /sys/class/net/IF/carrier_changes:N
		if f := strings.Split(l, "/"); len(f) == 6 {
			_, n, _ := strings.Cut(f[5], ":")
			s.Carrier[f[4]] = n
		}
	}
	for _, l := range links {
		s.Ifs[l.Ifname] = propIf{Index: l.Ifindex, MTU: l.MTU, Up: slices.Contains(l.Flags, "UP")}
	}
	for _, a := range addrs {
		s.Addrs[a.Ifname] = []string{}
		for _, ai := range a.AddrInfo {
			s.Addrs[a.Ifname] = append(s.Addrs[a.Ifname], fmt.Sprintf("%s/%d", ai.Local, ai.Prefixlen))
		}
		slices.Sort(s.Addrs[a.Ifname])
	}
	for _, part := range parts[2:4] {
		// A multipath route's next hops follow it on lines of their own, indented.
		for _, l := range strings.Split(strings.ReplaceAll(strings.TrimSpace(part), "\n\t", " "), "\n") {
			if l = strings.Join(strings.Fields(l), " "); l != "" {
				// in any order: zebra installs a group's next hops as its SPF run lists them
				hops := strings.Split(expires.ReplaceAllString(nhid.ReplaceAllString(l, ""), ""), " nexthop ")
				slices.Sort(hops[1:])
				s.Routes = append(s.Routes, strings.Join(hops, " nexthop "))
			}
		}
	}
	slices.Sort(s.Routes)
	for _, l := range strings.Split(parts[6], "\n") {
		// "10.255.0.2  1 Full/DR ..." (vtysh), "10.255.0.1  1  Full/Other ..." (birdc)
		if f := strings.Fields(l); len(f) > 3 && strings.Count(f[0], ".") == 3 && strings.Contains(f[2], "/") {
			s.OSPF = append(s.OSPF, [2]string{f[0], f[2]})
		}
	}
	for _, n := range neigh {
		switch {
		case slices.Contains(n.State, "PERMANENT"):
			s.Perm = append(s.Perm, fmt.Sprintf("%s %s %s", n.Dst, n.Lladdr, n.Dev))
		case slices.ContainsFunc(n.State, func(st string) bool { return st == "REACHABLE" || st == "STALE" || st == "DELAY" || st == "PROBE" }):
			s.Neigh[n.Dst+" "+n.Dev] = n.Used
		}
	}
	slices.Sort(s.Perm)
	return s, nil
}

// readPropAll reads every node, all at once.
func readPropAll(t *testing.T, state string, nodes []string) map[string]propSnap {
	t.Helper()
	snaps, errs := make([]propSnap, len(nodes)), make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { snaps[i], errs[i] = readProp(t, state, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	out := map[string]propSnap{}
	for i, n := range nodes {
		out[n] = snaps[i]
	}
	return out
}

// clone returns a deep copy of s, to be changed into an expectation.
func (s propSnap) clone() propSnap {
	c := propSnap{At: s.At, Ifs: maps.Clone(s.Ifs), Carrier: maps.Clone(s.Carrier), Addrs: map[string][]string{},
		Routes: slices.Clone(s.Routes), Perm: slices.Clone(s.Perm), Neigh: maps.Clone(s.Neigh)}
	for k, v := range s.Addrs {
		c.Addrs[k] = slices.Clone(v)
	}
	return c
}

// cloneAll returns a deep copy of every node's snapshot.
func cloneAll(snaps map[string]propSnap) map[string]propSnap {
	out := map[string]propSnap{}
	for n, s := range snaps {
		out[n] = s.clone()
	}
	return out
}

// Levels of comparison.
const (
	cmpNow     = iota // right after a change: interfaces, addresses and permanent neighbours
	cmpAimed          // a node the step aimed at, settled: cmpNow and its routes
	cmpUntouch        // a node the step did not aim at, settled: all of propSnap (see there)
)

// propGCStale is the kernel's gc_stale_time, the least time a neighbour entry not used
// stays (TestOwnershipProperty reads it: net.ipv4/ipv6.neigh.default.gc_stale_time).
var propGCStale = 60 * time.Second

// diffProp says how got differs from want at a level.
func diffProp(node string, want, got propSnap, level int) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want.Ifs)) {
		w := want.Ifs[k]
		if g, ok := got.Ifs[k]; !ok {
			out = append(out, fmt.Sprintf("%s: interface %s (%s) is gone", node, k, w))
		} else if w.MTU != g.MTU || w.Up != g.Up || (w.Index != 0 && w.Index != g.Index) {
			out = append(out, fmt.Sprintf("%s: interface %s is %s, want %s", node, k, g, w))
		}
	}
	for k, g := range got.Ifs {
		if _, ok := want.Ifs[k]; !ok {
			out = append(out, fmt.Sprintf("%s: interface %s (%s) is new", node, k, g))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want.Addrs)) {
		if !slices.Equal(want.Addrs[k], got.Addrs[k]) {
			out = append(out, fmt.Sprintf("%s: %s has addresses %v, want %v", node, k, got.Addrs[k], want.Addrs[k]))
		}
	}
	out = append(out, diffList(node, "permanent neighbours", want.Perm, got.Perm)...)
	switch level {
	case cmpAimed:
		out = append(out, diffList(node, "routes", want.Routes, got.Routes)...)
	case cmpUntouch:
		out = append(out, diffList(node, "routes", want.Routes, got.Routes)...)
		for _, k := range slices.Sorted(maps.Keys(want.Carrier)) {
			if want.Carrier[k] != got.Carrier[k] {
				out = append(out, fmt.Sprintf("%s: carrier changes of %s: %s, were %s", node, k, got.Carrier[k], want.Carrier[k]))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(want.Neigh)) {
			_, ok := got.Neigh[k]
			if unused := time.Duration(want.Neigh[k])*time.Second + got.At.Sub(want.At); !ok && unused < propGCStale {
				out = append(out, fmt.Sprintf("%s: neighbour %s no longer answers (used %s before)", node, k, unused))
			}
		}
	}
	return out
}

// diffList names what got lacks and has in excess of want.
func diffList(node, what string, want, got []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			out = append(out, fmt.Sprintf("%s: %s: lost %q", node, what, w))
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			out = append(out, fmt.Sprintf("%s: %s: new %q", node, what, g))
		}
	}
	return out
}
