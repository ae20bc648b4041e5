package embedsim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	pe "github.com/trellisnet/trellis/internal/plan/placement"
)

// Result is one algorithm on one instance.
type Result struct {
	Algorithm string  `json:"algorithm"`
	Workload  string  `json:"workload"`
	Seed      uint64  `json:"seed"`
	Requests  int     `json:"requests"`
	Accepted  int     `json:"accepted"`
	Accept    float64 `json:"acceptance"` // accepted / arrived, 0..1
	LRC       float64 `json:"lrc"`        // Σ revenue·lifetime / Σ cost·lifetime, accepted requests
	LAR       float64 `json:"lar"`        // Σ revenue·lifetime / simulated time
	Median    float64 `json:"seconds_per_request_median"`
	P99       float64 `json:"seconds_per_request_p99"`
	Max       float64 `json:"seconds_per_request_max"`
	// CrossBW is the share of accepted virtual-link bandwidth that crosses machines (placement).
	CrossBW *float64 `json:"cross_machine_bw_share,omitempty"`
	// Imbalance is the mean, over arrivals, of (max − mean) / mean CPU use of the machines
	// (placement): 0 when every machine carries the same load.
	Imbalance *float64 `json:"load_imbalance,omitempty"`
	// Curve is the acceptance ratio so far after every CurveStep arrivals.
	Curve     []float64 `json:"acceptance_curve,omitempty"`
	CurveStep int       `json:"acceptance_curve_step,omitempty"`
}

// curvePoints is about how many points an acceptance curve has.
const curvePoints = 50

type event struct {
	t      float64
	arrive bool
	req    int
}

// events orders arrivals and departures by time; at one time, arrivals first (as Virne does).
func events(reqs []pe.Request) []event {
	ev := make([]event, 0, 2*len(reqs))
	for i, r := range reqs {
		ev = append(ev, event{r.Arrival, true, i})
	}
	for i, r := range reqs {
		ev = append(ev, event{r.Arrival + r.Lifetime, false, i})
	}
	sort.SliceStable(ev, func(a, b int) bool { return ev[a].t < ev[b].t })
	return ev
}

// Simulate runs one algorithm over an instance. It fails if the algorithm proposes an
// embedding that the state refuses (an over-commit), which is a bug in the algorithm.
func Simulate(ctx context.Context, in *Instance, alg pe.Algorithm) (*Result, error) {
	st, err := pe.NewState(in.Problem, &in.Sub)
	if err != nil {
		return nil, err
	}
	res := &Result{Algorithm: alg.Name(), Workload: in.Workload, Seed: in.Seed, Requests: len(in.Requests)}
	res.CurveStep = max(1, len(in.Requests)/curvePoints)
	held := make([]*pe.Embedding, len(in.Requests))
	var times []float64
	var revT, costT, bw, cross, imb float64
	arrived := 0
	lastLeave, horizon := math.Inf(-1), 0.0
	for _, ev := range events(in.Requests) {
		r := &in.Requests[ev.req]
		if !ev.arrive {
			if held[ev.req] != nil {
				st.Release(r, held[ev.req])
				held[ev.req] = nil
			}
			if ev.t >= lastLeave {
				lastLeave, horizon = ev.t, r.Arrival
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		arrived++
		start := time.Now()
		e, err := alg.Embed(st, r)
		times = append(times, time.Since(start).Seconds())
		switch {
		case err == nil:
			if err := st.Apply(r, e); err != nil {
				return nil, fmt.Errorf("%s on %s seed %d request %d: proposed an embedding the substrate cannot hold: %w", alg.Name(), in.Workload, in.Seed, r.ID, err)
			}
			held[ev.req] = e
			res.Accepted++
			revT += r.Revenue() * r.Lifetime
			costT += r.Cost(e) * r.Lifetime
			for _, l := range r.Links {
				bw += l.BW
			}
			cross += r.CrossBW(e)
		case errors.Is(err, pe.ErrNoCapacity), errors.Is(err, pe.ErrRejected):
		default:
			return nil, fmt.Errorf("%s on request %d: %w", alg.Name(), r.ID, err)
		}
		if in.Problem == pe.Placement {
			imb += imbalance(st)
		}
		if arrived%res.CurveStep == 0 {
			res.Curve = append(res.Curve, float64(res.Accepted)/float64(arrived))
		}
	}
	res.Accept = ratio(float64(res.Accepted), float64(arrived))
	res.LRC = ratio(revT, costT)
	res.LAR = ratio(revT, horizon)
	res.Median, res.P99, res.Max = quantile(times, 0.5), quantile(times, 0.99), quantile(times, 1)
	if in.Problem == pe.Placement {
		c, m := ratio(cross, bw), ratio(imb, float64(arrived))
		res.CrossBW, res.Imbalance = &c, &m
	}
	return res, nil
}

// imbalance is (max − mean) / mean of the machines' CPU use, 0 if nothing is used.
func imbalance(st *pe.State) float64 {
	var sum, top float64
	for i, n := range st.Sub.Nodes {
		u := ratio(n.CPU-st.CPU[i], n.CPU)
		sum += u
		top = math.Max(top, u)
	}
	mean := sum / float64(len(st.CPU))
	return ratio(top-mean, mean)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// quantile is the q-quantile (nearest rank) of xs; 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
