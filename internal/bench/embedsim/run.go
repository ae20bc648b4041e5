package embedsim

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"

	pe "github.com/trellisnet/trellis/internal/plan/placement"
)

// Part is the name of this part of `trellis-bench --parts`.
const Part = "embed"

// Seeds are the seeds of a full run, as in Virne.
var Seeds = []uint64{0, 1111, 2222, 3333, 4444, 5555, 6666, 7777, 8888, 9999}

// Options say what a run simulates.
type Options struct {
	Quick      bool     // 3 seeds, 300 WX100 requests and 40 testbed networks
	Traces     []string // replay these trace files instead of generating workloads
	WriteTrace string   // write every generated instance as a trace: FILE-<workload>-<seed>.json
	Workers    int      // simulations at once; 0: one (solve times are then not disturbed)
	Log        io.Writer
}

// Algorithms are the algorithms run on a problem, baseline first.
func Algorithms(p pe.Problem) []pe.Algorithm {
	if p == pe.Placement {
		return []pe.Algorithm{pe.Spread{}, pe.Pack{}}
	}
	return []pe.Algorithm{pe.NewGRC(), pe.NewBeam()}
}

// Instances are the instances a run simulates: the traces if any, else WX100 and the testbed
// workload on every seed.
func Instances(opt Options) ([]*Instance, error) {
	var out []*Instance
	for _, path := range opt.Traces {
		in, err := ReadTrace(path)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	if len(out) > 0 {
		return out, nil
	}
	wx, tb, seeds := DefaultWX100(), DefaultTestbed(), Seeds
	if opt.Quick {
		wx.Requests, tb.Requests, seeds = 300, 40, Seeds[:3]
	}
	for _, s := range seeds {
		out = append(out, wx.Generate(s))
	}
	for _, s := range seeds {
		out = append(out, tb.Generate(s))
	}
	if opt.WriteTrace != "" {
		base := strings.TrimSuffix(opt.WriteTrace, ".json")
		for _, in := range out {
			path := fmt.Sprintf("%s-%s-%d.json", base, in.Workload, in.Seed)
			if err := WriteTrace(path, in); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Run simulates every algorithm on every instance and returns the results in instance order.
func Run(ctx context.Context, opt Options) ([]*Result, error) {
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	ins, err := Instances(opt)
	if err != nil {
		return nil, err
	}
	type job struct {
		in  *Instance
		alg pe.Algorithm
	}
	var jobs []job
	for _, in := range ins {
		for _, a := range Algorithms(in.Problem) {
			jobs = append(jobs, job{in, a})
		}
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = 1
	}
	results := make([]*Result, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i], errs[i] = Simulate(ctx, jobs[i].in, jobs[i].alg)
				if r := results[i]; r != nil {
					mu.Lock()
					fmt.Fprintf(opt.Log, "embed: %-8s seed %-5d %-10s acceptance %.3f lrc %.3f\n", r.Workload, r.Seed, r.Algorithm, r.Accept, r.LRC)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// RunCLI is `trellis-bench --parts embed`: it runs, writes embed.md and the acceptance plots
// into dir, and returns the results for bench.json.
func RunCLI(ctx context.Context, opt Options, dir string) ([]*Result, error) {
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	res, err := Run(ctx, opt)
	if err != nil {
		return nil, err
	}
	plots, err := Plot(res, dir)
	if err != nil {
		return nil, fmt.Errorf("embed plots: %w", err)
	}
	if err := WriteMarkdown(filepath.Join(dir, "embed.md"), res, plots); err != nil {
		return nil, err
	}
	fmt.Fprint(opt.Log, Table(res))
	return res, nil
}

// TakePart removes Part from a list of bench parts and tells whether it was there; the embed
// part needs no kernel, so the other parts run without it.
func TakePart(parts []string) ([]string, bool) {
	var rest []string
	found := false
	for _, p := range parts {
		if p == Part {
			found = true
		} else {
			rest = append(rest, p)
		}
	}
	return rest, found
}
