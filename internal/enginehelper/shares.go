package enginehelper

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/plan/placement"
	"golang.org/x/sys/unix"
)

// Shares gives the engines on this machine that ask for a share of the cores (`cpus: 0.5`)
// their cores by the PdP paper's best-fit rule (Algorithm 1, placement.SliceAlloc): an engine
// asking for k+r cores gets k idle cores and one slice of r on the core whose free power is
// closest above r. cores are this machine's cores, each of power 1; an engine with its own CPU
// list takes power 1 spread over them first. Engines are served node by node in name order,
// each node's in order. The result gives, per node, each engine's cores (nil for an engine
// without a share).
func Shares(p *plan.Plan, cores []int) (map[string][][]int, error) {
	free := make([]float64, len(cores))
	at := map[int]int{} // core -> its index in cores
	for i, c := range cores {
		free[i], at[c] = 1, i
	}
	nodes := slices.Clone(p.Nodes)
	slices.SortFunc(nodes, func(a, b *plan.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		for _, e := range n.Engines {
			for _, c := range e.CPUs {
				if i, ok := at[c]; ok && e.Host == "" {
					free[i] = max(0, free[i]-1/float64(len(e.CPUs)))
				}
			}
		}
	}
	out := map[string][][]int{}
	for _, n := range nodes {
		for i, e := range n.Engines {
			if e.Share == 0 || e.Host != "" {
				continue
			}
			if out[n.Name] == nil {
				out[n.Name] = make([][]int, len(n.Engines))
			}
			got, err := placement.SliceAlloc(free, 1, e.Share)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: nodes.%s.engines[%d].cpus: %g cores are not free among this machine's %d (%v); ask for less, or name cores",
					ErrConfig, e.Line, n.Name, i, e.Share, len(cores), err)
			}
			for _, s := range got {
				out[n.Name][i] = append(out[n.Name][i], cores[s.Engine])
			}
			slices.Sort(out[n.Name][i])
		}
	}
	return out, nil
}

// Cores returns the cores this process may run on: those the machine gives out.
func Cores() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("cores of this machine: %w", err)
	}
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}
