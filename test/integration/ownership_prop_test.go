//go:build integration

package integration

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// OSPF's timers in the routers' configurations, and what bounds reconvergence.
const (
	propDead = 4 * time.Second // dead interval (hello 1 s) on every router interface
	propRxmt = 5 * time.Second // retransmit interval, FRR's and BIRD's default
	propLSA  = 5 * time.Second // FRR's least time between two originations of an LSA
	propSPF  = 5 * time.Second // FRR's longest SPF hold time (timers throttle spf 0 50 5000)
	// propBound is how long the routers may take to reconverge after a step: a neighbour
	// lost is declared dead within one dead interval, a LAN's DR election waits one more
	// (BIRD's wait and FRR's both default to the dead interval), a router's new LSA may wait
	// for the least interval since its last, an LSA lost to an impairment is sent again after
	// the retransmit interval, and SPF runs within its longest hold; 4 s more for a read of
	// every node on a loaded machine.
	propBound = 2*propDead + propLSA + propRxmt + propSPF + 4*time.Second
)

// propCISeed is CI's seed. CI runs as many steps as there are kinds of step, so that every
// kind runs once (a sequence's first steps are a permutation of the kinds).
const propCISeed = 24

// TestOwnershipProperty runs a random sequence of live changes (from a seed) on a network of
// routers whose daemons configure their own addresses and routes (stock FRR with its addresses
// only in frr.conf, BIRD with addresses from its node's own script) and hosts with file-given
// addresses, and checks after each step that every node the step did not aim at is exactly as
// before (interfaces with their index, MTU and state, addresses, routes of every table,
// neighbours), that in the nodes it aimed at what their software made is still there (except
// what the step removes by design), and that the routers reconverge within OSPF's timers.
// TRELLIS_PROP_SEED and TRELLIS_PROP_STEPS choose another sequence (README.md).
func TestOwnershipProperty(t *testing.T) {
	for _, bin := range []string{"/usr/lib/frr/zebra", "bird"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed (%v): scripts/setup.sh installs frr and bird2", bin, err)
		}
	}
	seed, steps := uint64(propCISeed), len(propKinds)
	if v := os.Getenv("TRELLIS_PROP_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TRELLIS_PROP_SEED=%q: want a number", v)
		}
		seed = n
	}
	if v := os.Getenv("TRELLIS_PROP_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TRELLIS_PROP_STEPS=%q: want a number of steps, at least 1", v)
		}
		steps = n
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		b, err := os.ReadFile("/proc/sys/net/" + fam + "/neigh/default/gc_stale_time")
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s gc_stale_time %q: %v", fam, b, err)
		}
		propGCStale = min(propGCStale, time.Duration(n)*time.Second)
	}
	e := start(t)
	r := &propRun{t: t, state: e.state, w: newWorld(), seed: seed, rng: rand.New(rand.NewPCG(seed, seed))}
	r.writeFiles()
	began := time.Now()
	mustTrellis(t, e.state, "up", r.topo)
	r.waitBase()
	t.Logf("seed %d, %d steps; the network converged %.1fs after up began", seed, steps, time.Since(began).Seconds())

	order := r.rng.Perm(len(propKinds))
	for i := range steps {
		k := r.rng.IntN(len(propKinds))
		if i < len(order) {
			k = order[i]
		}
		r.i, r.desc = i+1, propKinds[k].name
		stepBegan := time.Now()
		propKinds[k].run(r)
		t.Logf("step %d/%d done in %.1fs: %s", i+1, steps, time.Since(stepBegan).Seconds(), r.desc)
		r.done = append(r.done, r.desc)
	}
	t.Logf("seed %d: %d steps in %.1fs; slowest reconvergence %.1fs (bound %s)", seed, steps, time.Since(began).Seconds(), r.slowest.Seconds(), propBound)
	mustTrellis(t, e.state, "down", propNet)
	e.assertClean()
}

// propRun is one run of the property test.
type propRun struct {
	t           *testing.T
	state, topo string
	w           *world
	seed        uint64
	i           int // the current step, from 1
	rng         *rand.Rand
	desc        string   // the current step, as printed
	done        []string // the steps done before it
	slowest     time.Duration
}

// fatalf fails the test with what replays it: the seed, the step and the steps before it.
func (r *propRun) fatalf(format string, args ...any) {
	r.t.Helper()
	var b strings.Builder
	for i, d := range r.done {
		fmt.Fprintf(&b, "  %d. %s\n", i+1, d)
	}
	r.t.Fatalf("seed %d, step %d (%s): %s\nsteps before it:\n%sreplay: TRELLIS_PROP_SEED=%d TRELLIS_PROP_STEPS=%d go test -tags integration -count=1 -run TestOwnershipProperty ./test/integration/",
		r.seed, r.i, r.desc, fmt.Sprintf(format, args...), b.String(), r.seed, r.i)
}

// writeFiles writes the routers' configurations and the topology file.
func (r *propRun) writeFiles() {
	root, err := moduleRoot()
	if err != nil {
		r.t.Fatal(err)
	}
	daemons, err := os.ReadFile(filepath.Join(root, "examples/frr-ospf/daemons"))
	if err != nil {
		r.t.Fatal(err)
	}
	dir := r.t.TempDir()
	files := map[string]string{"daemons": string(daemons), "r4-bird.conf": propBIRDConf, "r4-addrs.sh": propR4Addrs}
	for n := 1; n <= 3; n++ {
		files[fmt.Sprintf("r%d.conf", n)] = propFRRConf(n)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.topo = filepath.Join(dir, propNet+".yaml")
	rewriteTopo(r.t, r.topo, r.w.topo())
}

// nodes are the nodes the test reads (h9 comes and goes within one step).
func (r *propRun) nodes() []string { return []string{"r1", "r2", "r3", "r4", "h1", "h2"} }

func (r *propRun) snap() map[string]propSnap { return readPropAll(r.t, r.state, r.nodes()) }

// trellis runs a trellis command of the step, failing with the replay on error.
func (r *propRun) trellis(args ...string) {
	r.t.Helper()
	r.t.Logf("step %d: trellis %s", r.i, strings.Join(args, " "))
	if out, errOut, err := trellis(r.t, r.state, args...); err != nil {
		r.fatalf("trellis %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
}

// up writes the world's topology file and runs `trellis up` of it.
func (r *propRun) up() {
	r.t.Helper()
	rewriteTopo(r.t, r.topo, r.w.topo())
	r.trellis("up", r.topo)
}

// check compares every node right after a change (cmpNow) with want.
func (r *propRun) check(what string, want map[string]propSnap) {
	r.t.Helper()
	got := r.snap()
	var diffs []string
	for _, n := range slices.Sorted(maps.Keys(want)) {
		diffs = append(diffs, diffProp(n, want[n], got[n], cmpNow)...)
	}
	if diffs != nil {
		r.fatalf("right after %s:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// settle waits until the routers reconverged (every expected OSPF adjacency and a route to
// every router's loopback) and every node holds want again: exactly, for a node not in
// aimed; what its software made (interfaces, addresses, permanent neighbours, routes'
// destinations), for a node in aimed. A want without routes is not compared on routes.
func (r *propRun) settle(want map[string]propSnap, aimed map[string]bool) {
	r.t.Helper()
	began := time.Now()
	deadline := began.Add(propBound)
	var conv time.Duration
	for {
		at := time.Now()
		got := r.snap()
		why := r.converged(got)
		if why == nil && conv == 0 {
			conv = at.Sub(began)
		}
		if why == nil {
			for _, n := range slices.Sorted(maps.Keys(want)) {
				level := cmpUntouch
				if aimed[n] {
					level = cmpAimed
				}
				w := want[n]
				if w.Routes == nil {
					level = cmpNow
				}
				why = append(why, diffProp(n, w, got[n], level)...)
			}
		}
		if why == nil {
			r.slowest = max(r.slowest, conv)
			r.t.Logf("step %d: reconverged in %.1fs, every node as expected after %.1fs", r.i, conv.Seconds(), at.Sub(began).Seconds())
			return
		}
		if at.After(deadline) {
			r.fatalf("not as expected %s after the change (aimed at %v):\n%s", propBound, slices.Sorted(maps.Keys(aimed)), strings.Join(why, "\n"))
		}
		time.Sleep(time.Second)
	}
}

// converged says why the routers have not reconverged yet (nil: they have): each router has
// every OSPF neighbour its links give it, in state Full (or 2-Way between two routers that
// are neither DR nor BDR of a LAN), and a route to every other router's loopbacks and to
// BIRD's static routes (announced into OSPF by r4).
func (r *propRun) converged(got map[string]propSnap) []string {
	var why []string
	for _, rt := range propRouters {
		var want, have []string
		for l := range propLinks {
			eps := nodesOf(r.w.endpoints(l))
			if slices.Contains(eps, rt) {
				for _, n := range eps {
					if n != rt && slices.Contains(propRouters, n) {
						want = append(want, "10.255.0."+n[1:])
					}
				}
			}
		}
		for _, nb := range got[rt].OSPF {
			if strings.HasPrefix(nb[1], "Full/") || nb[1] == "2-Way/DROther" || nb[1] == "2-Way/Other" {
				have = append(have, nb[0])
			}
		}
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(want, have) {
			why = append(why, fmt.Sprintf("%s: OSPF neighbours %v, want %v adjacent", rt, got[rt].OSPF, want))
		}
		dests := []string{"10.254.4.0/24", "fd00:254:4::/48"}
		for _, o := range propRouters {
			if o != rt {
				dests = append(dests, "10.255.0."+o[1:], "fd00:255::"+o[1:])
			}
		}
		for _, d := range dests {
			if !slices.ContainsFunc(got[rt].Routes, func(l string) bool { return routeTo(l, d) }) {
				why = append(why, fmt.Sprintf("%s: no route to %s", rt, d))
			}
		}
	}
	return why
}

// routeTo reports whether a route of the main table (as ip prints it) goes to dst: a unicast
// route, or BIRD's blackhole on r4.
func routeTo(route, dst string) bool {
	f := strings.Fields(route)
	if f[0] == "blackhole" {
		f = f[1:]
	}
	return f[0] == dst && !strings.Contains(route, " table ")
}

// waitBase waits for the network to converge after the first up, checks that the routers'
// software made what it should (zebra's addresses, r4's script's, BIRD's routes), and waits
// until two reads in a row agree (neighbours learnt).
func (r *propRun) waitBase() {
	deadline := time.Now().Add(120 * time.Second)
	prev := r.snap()
	for {
		time.Sleep(2 * time.Second)
		now := r.snap()
		why := r.converged(now)
		for _, n := range r.nodes() {
			why = append(why, diffProp(n, prev[n], now[n], cmpUntouch)...)
		}
		if why == nil {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("seed %d: the network does not converge and settle within 120 s:\n%s", r.seed, strings.Join(why, "\n"))
		}
		prev = now
	}
	for node, ifAddr := range map[string][2]string{"r1": {"r1-eth1", "10.0.100.1/24"}, "r2": {"r2-eth3", "fd00:20::1/64"},
		"r4": {"eth2", "10.0.34.4/24"}, "h1": {"eth1", "10.0.100.111/24"}} {
		if !slices.Contains(prev[node].Addrs[ifAddr[0]], ifAddr[1]) {
			r.t.Fatalf("%s: its software's address %s is not on %s: %v", node, ifAddr[1], ifAddr[0], prev[node].Addrs)
		}
	}
}
