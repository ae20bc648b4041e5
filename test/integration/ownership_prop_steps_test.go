//go:build integration

package integration

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// propKind is one kind of live change of the property test. run draws its details from the
// run's generator, sets r.desc to what it does (printed, and given on failure), makes the
// change and checks the nodes.
type propKind struct {
	name string
	run  func(r *propRun)
}

var propKinds = []propKind{
	{"rate", stepRate},
	{"impairment in the file", stepImpairFile},
	{"impairment through trellis link set", stepImpairLink},
	{"whole link down and up", stepLinkFlap},
	{"one endpoint down and up", stepEndpointFlap},
	{"mtu", stepMTU},
	{"node added and removed", stepNode},
	{"file address added or removed", stepAddress},
	{"up of the unchanged file", stepUp},
}

// pick returns one of list, drawn from the run's generator.
func pick[T any](r *propRun, list []T) T { return list[r.rng.IntN(len(list))] }

func (r *propRun) linkNames() []string { return slices.Sorted(maps.Keys(propLinks)) }

// aimedAt returns the nodes of a link: the nodes a change of the link aims at.
func (r *propRun) aimedAt(link string) map[string]bool {
	out := map[string]bool{}
	for _, n := range nodesOf(r.w.endpoints(link)) {
		out[n] = true
	}
	return out
}

// stepRate changes a link's rate in the file: nothing inside any node changes.
func stepRate(r *propRun) {
	l := pick(r, r.linkNames())
	rate := pick(r, slices.DeleteFunc([]string{"", "10mbit", "50mbit", "200mbit"}, func(s string) bool { return s == r.w.rate[l] }))
	r.desc = fmt.Sprintf("rate of %s %q -> %q (file)", l, r.w.rate[l], rate)
	before := r.snap()
	r.w.rate[l] = rate
	r.up()
	r.check("the rate change", before)
	r.settle(before, nil)
}

// stepImpairFile sets or clears a link's impairment in the file.
func stepImpairFile(r *propRun) {
	l := pick(r, r.linkNames())
	imp := ""
	if r.w.impair[l] == "" {
		imp = pick(r, []string{"loss: 2%", "duplicate: 1%", "corrupt: 1%"})
	}
	r.desc = fmt.Sprintf("impairment of %s %q -> %q (file)", l, r.w.impair[l], imp)
	before := r.snap()
	r.w.impair[l] = imp
	r.up()
	r.check("the impairment change", before)
	r.settle(before, nil)
}

// stepImpairLink sets a link's impairment with `trellis link set`, for the whole link or
// the frames one endpoint sends, and clears it again.
func stepImpairLink(r *propRun) {
	l := pick(r, r.linkNames())
	key := pick(r, []string{"loss=3%", "duplicate=2%", "corrupt=1%"})
	args := []string{"link", propNet, l, "set", key}
	if r.rng.IntN(2) == 0 {
		args = append(args, "--endpoint", pick(r, r.w.endpoints(l)))
	}
	r.desc = "trellis " + strings.Join(args, " ") + ", then set with no keys"
	before := r.snap()
	r.trellis(args...)
	r.check("link set", before)
	r.trellis(slices.Concat(args[:4], args[5:])...)
	r.check("link set with no keys", before)
	r.settle(before, nil)
}

// stepLinkFlap takes a whole link down with `trellis link`, waits past OSPF's dead interval,
// and brings it up with `trellis link ... up` or `trellis up` of the file.
func stepLinkFlap(r *propRun) {
	r.flap(pick(r, r.linkNames()), "")
}

// stepEndpointFlap does the same for one endpoint of a link.
func stepEndpointFlap(r *propRun) {
	l := pick(r, r.linkNames())
	r.flap(l, pick(r, r.w.endpoints(l)))
}

func (r *propRun) flap(l, ep string) {
	down := []string{"link", propNet, l, "down"}
	if ep != "" {
		down = append(down, "--endpoint", ep)
	}
	byUp := r.rng.IntN(2) == 0
	r.desc = "trellis " + strings.Join(down, " ") + ", then "
	if byUp {
		r.desc += "trellis up of the file"
	} else {
		r.desc += "link up"
	}
	before := r.snap()
	r.trellis(down...)
	r.check("link down", before)
	time.Sleep(propDead + time.Second) // the neighbours notice
	if byUp {
		r.up()
	} else {
		r.trellis(append(slices.Clone(down[:3]), append([]string{"up"}, down[4:]...)...)...)
	}
	r.check("link up", before)
	r.settle(before, r.aimedAt(l))
}

// stepMTU changes a link's MTU in the file: the link's interfaces keep their index and
// everything the nodes' software set on them, with the new MTU.
func stepMTU(r *propRun) {
	l := pick(r, r.linkNames())
	mtu := pick(r, slices.DeleteFunc([]int{0, 1400, 1450}, func(m int) bool { return m == r.w.mtu[l] }))
	r.desc = fmt.Sprintf("mtu of %s %d -> %d (file; 0 is the default, 1500)", l, r.w.mtu[l], mtu)
	before := r.snap()
	want := cloneAll(before)
	r.w.mtu[l] = mtu
	for _, ep := range r.w.endpoints(l) {
		node, ifname, _ := strings.Cut(ep, ":")
		if s, ok := want[node]; ok { // not h9
			i := s.Ifs[ifname]
			i.MTU = cmp.Or(mtu, 1500)
			s.Ifs[ifname] = i
		}
	}
	r.up()
	r.check("the mtu change", want)
	r.settle(want, r.aimedAt(l))
}

// stepNode adds the node h9 on the LAN, or on a new link to r4, and removes it: the other
// nodes do not change (r4 gets an interface eth9 and loses it again).
func stepNode(r *propRun) {
	where := pick(r, []string{"lan", "r4"})
	r.desc = "node h9 added (on " + where + ") and removed (file)"
	before := r.snap()
	want := cloneAll(before)
	aimed := map[string]bool{}
	if where == "r4" {
		aimed["r4"] = true
		w := want["r4"]
		w.Ifs["eth9"] = propIf{MTU: 1500, Up: true}
		w.Routes = nil // its new link-local address's routes
		want["r4"] = w
	}
	r.w.h9 = where
	r.up()
	r.check("h9 added", want)
	r.settle(want, aimed)
	r.w.h9 = ""
	r.up()
	r.check("h9 removed", before)
	r.settle(before, aimed)
}

// stepAddress adds h1's or h2's extra addresses to the file, or removes them: that host's
// interface gains or loses them (and their local routes), and nothing else changes.
func stepAddress(r *propRun) {
	h := pick(r, []string{"h1", "h2"})
	add := !r.w.extra[h]
	r.desc = fmt.Sprintf("%s eth1: %v %s the file", h, propExtraAddrs[h], map[bool]string{true: "added to", false: "removed from"}[add])
	before := r.snap()
	want := cloneAll(before)
	w := want[h]
	primary := strings.SplitN(map[string][]string{"h1": propH1Addrs, "h2": propH2Addrs}[h][0], "/", 2)[0]
	for _, a := range propExtraAddrs[h] {
		ip := strings.SplitN(a, "/", 2)[0]
		local := "local " + ip + " dev eth1 table local proto kernel scope host src " + primary
		if strings.Contains(ip, ":") {
			local = "local " + ip + " dev eth1 table local proto kernel metric 0 pref medium"
		}
		if add {
			w.Addrs["eth1"] = append(w.Addrs["eth1"], a)
			w.Routes = append(w.Routes, local)
		} else {
			w.Addrs["eth1"] = slices.DeleteFunc(w.Addrs["eth1"], func(s string) bool { return s == a })
			w.Routes = slices.DeleteFunc(w.Routes, func(s string) bool { return s == local })
		}
	}
	slices.Sort(w.Routes)
	want[h] = w
	slices.Sort(w.Addrs["eth1"])
	r.w.extra[h] = add
	r.up()
	r.check("the address change", want)
	r.settle(want, map[string]bool{h: true})
}

// stepUp runs `trellis up` of the unchanged file (which also ends what `trellis link set`
// left): nothing inside any node changes.
func stepUp(r *propRun) {
	r.desc = "up of the unchanged file"
	before := r.snap()
	r.up()
	r.check("up", before)
	r.settle(before, nil)
}
