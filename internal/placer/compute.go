package placer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/plan/placement"
	"github.com/trellisnet/trellis/internal/spec"
)

// ErrNoFit: the network does not fit on the registered machines (the error says which
// machine and resource are short), or names a machine that is not registered.
var ErrNoFit = errors.New("does not fit")

// Load is what the other networks' nodes take of each machine.
type Load map[string]*Use

// Use is what nodes take of one machine.
type Use struct {
	Nodes  int
	CPU    float64 // cores
	Memory uint64  // bytes
	Rate   uint64  // bit/s of links that cross to other machines
}

// Compute places network n (parsed with spec.ParseCluster) onto the registered machines:
//   - a node with `host:` goes there (a machine that is not registered is refused, unless the
//     node was placed there before: it stays, and runs again when the machine is back);
//   - a node of prev (the network's placement so far) whose machine is registered stays;
//   - the others are placed: with capacities (a node's cpu or memory) by the embedding
//     algorithm of internal/plan/placement on what the machines offer minus load (cores, memory,
//     NIC rate), so that no machine gets more than it offers; without, each on the machine
//     with the fewest nodes (of every network), by name on a tie.
//
// It returns the placement's nodes and machines, or an error wrapping ErrNoFit.
func Compute(n *spec.Network, machines []*cluster.Machine, prev *cluster.Placement, load Load) (map[string]string, map[string]cluster.Underlay, error) {
	byName := map[string]*cluster.Machine{}
	var names []string
	for _, m := range machines {
		byName[m.Name] = m
		names = append(names, m.Name)
	}
	sort.Strings(names)
	out := map[string]string{}
	under := map[string]cluster.Underlay{}
	for _, nd := range n.Nodes {
		want := nd.Host
		if want == "" && prev != nil {
			if m := prev.Nodes[nd.Name]; byName[m] != nil {
				want = m
			}
		}
		if want == "" {
			continue
		}
		switch m := byName[want]; {
		case m != nil:
			under[want] = cluster.Underlay{Address: m.Address, MTU: m.MTU, Endpoint: m.Endpoint}
		case prev != nil && prev.Nodes[nd.Name] == want:
			under[want] = prev.Machines[want] // pinned to a lost machine: it stays
		default:
			return nil, nil, fmt.Errorf("%w: node %s: host %q is not a registered machine (registered: %s)", ErrNoFit, nd.Name, want, strings.Join(names, ", "))
		}
		out[nd.Name] = want
	}
	if len(out) < len(n.Nodes) {
		if len(machines) == 0 {
			return nil, nil, fmt.Errorf("%w: no machine is registered (is any trellis agent running?)", ErrNoFit)
		}
		var err error
		if hasNeeds(n) {
			err = byCapacity(n, machines, load, out)
		} else {
			spread(n, names, load, out)
		}
		if err != nil {
			return nil, nil, err
		}
		for _, m := range out {
			if mm := byName[m]; mm != nil {
				under[m] = cluster.Underlay{Address: mm.Address, MTU: mm.MTU, Endpoint: mm.Endpoint}
			}
		}
	}
	return out, under, nil
}

func hasNeeds(n *spec.Network) bool {
	return slices.ContainsFunc(n.Nodes, func(nd *spec.Node) bool { return !nd.Needs.IsZero() })
}

// spread puts each unplaced node, in file order, on the machine with the fewest nodes.
func spread(n *spec.Network, names []string, load Load, out map[string]string) {
	count := map[string]int{}
	for _, m := range names {
		if u := load[m]; u != nil {
			count[m] = u.Nodes
		}
	}
	for _, m := range out {
		count[m]++
	}
	for _, nd := range n.Nodes {
		if _, ok := out[nd.Name]; ok {
			continue
		}
		best := names[0]
		for _, m := range names[1:] {
			if count[m] < count[best] {
				best = m
			}
		}
		out[nd.Name] = best
		count[best]++
	}
}

// byCapacity places the unplaced nodes with the embedding algorithm, on what each machine
// offers minus its load; memory counts in MiB and rates in Mbit/s there.
func byCapacity(n *spec.Network, machines []*cluster.Machine, load Load, out map[string]string) error {
	const mib, mbit = 1 << 20, 1e6
	var ms []placement.Machine
	for _, m := range machines {
		u := load[m.Name]
		if u == nil {
			u = &Use{}
		}
		em := placement.Machine{Name: m.Name, Cores: math.MaxFloat32}
		if m.Cores > 0 {
			em.Cores = math.Max(m.Cores-u.CPU, 0)
		}
		if m.Memory > 0 {
			em.Memory = math.Max(float64(m.Memory)-float64(u.Memory), 1) / mib // 0 would mean unlimited
		}
		if m.Rate > 0 {
			em.NIC = math.Max(float64(m.Rate)-float64(u.Rate), 1) / mbit
		}
		ms = append(ms, em)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	var nodes []placement.NetNode
	for _, nd := range n.Nodes {
		nodes = append(nodes, placement.NetNode{Name: nd.Name, CPU: nd.Needs.CPU, Memory: float64(nd.Needs.Memory) / mib, Machine: out[nd.Name]})
	}
	var links []placement.NetLink
	for _, l := range n.Links {
		for i := 1; i < len(l.Endpoints); i++ { // a LAN counts as a star from its first member
			links = append(links, placement.NetLink{A: l.Endpoints[0].Node, B: l.Endpoints[i].Node, Rate: float64(l.Rate) / mbit})
		}
	}
	placed, err := placement.PlaceNetwork(ms, nodes, links)
	if err != nil {
		return fmt.Errorf("%w: %v (free capacity; memory in MiB, rates in Mbit/s)", ErrNoFit, err)
	}
	for k, v := range placed {
		out[k] = v
	}
	return nil
}

// LoadOf counts what network n placed by p takes of each machine, into load.
func LoadOf(n *spec.Network, p *cluster.Placement, load Load) {
	use := func(m string) *Use {
		if load[m] == nil {
			load[m] = &Use{}
		}
		return load[m]
	}
	for _, nd := range n.Nodes {
		if m, ok := p.Nodes[nd.Name]; ok {
			u := use(m)
			u.Nodes++
			u.CPU += nd.Needs.CPU
			u.Memory += nd.Needs.Memory
		}
	}
	for _, l := range n.Links {
		on := map[string]bool{}
		for _, e := range l.Endpoints {
			if m := p.Nodes[e.Node]; m != "" {
				on[m] = true
			}
		}
		if len(on) > 1 {
			for m := range on {
				use(m).Rate += l.Rate
			}
		}
	}
}
