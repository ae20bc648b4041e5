package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
)

// limitCores is the CPU limit of the limits part's held noderuntime.
const limitCores = 0.5

// limitsTopology is a node held to limitCores (cpu) and one without a limit.
const limitsTopology = `name: bench-limits
nodes:
  held: {cpu: 0.5}
  free: {}
`

// limits measures whether a CPU limit holds when the machine is busy (Mininet-HiFi's test): a
// node held to half a core and an unlimited node each run as many busy loops as the machine has
// cores, and the held node's CPU time is read from its cgroup over each trial.
func (r *runner) limits() error {
	st, err := r.h.Store()
	if err != nil {
		return err
	}
	net, err := spec.Parse("bench-limits.yaml", []byte(limitsTopology))
	if err != nil {
		return err
	}
	if _, err := substrate.Up(context.Background(), st, net, "", "(trellis-bench)", r.opt.Substrate); err != nil {
		setup.DownQuiet(st, net.Name)
		return err
	}
	defer setup.DownQuiet(st, net.Name)
	rec, err := st.Load(net.Name)
	if err != nil {
		return err
	}
	pids, err := noderuntime.Find(st.ID, rec.NetID)
	if err != nil {
		return err
	}
	trial := max(4*r.opt.Trial, 2*time.Second)
	secs := strconv.Itoa(int((trial + 2*time.Second).Seconds()))
	spin := "for i in $(seq $(nproc)); do timeout " + secs + " sh -c 'while :; do :; done' & done; wait"
	var cores []float64
	for rep := 0; rep < r.opt.Repeat; rep++ {
		var loads []*exec.Cmd
		for _, name := range []string{"free", "held"} {
			cmd, err := noderuntime.Command(pids[name], "sh", "-c", spin)
			if err == nil {
				err = cmd.Start()
			}
			if err != nil {
				return fmt.Errorf("load in node %s: %w", name, err)
			}
			loads = append(loads, cmd)
		}
		c, err := heldCores(st, net.Name, trial)
		for _, l := range loads {
			l.Wait()
		}
		if err != nil {
			return err
		}
		cores = append(cores, c)
	}
	res := &result.LimitsResult{Limit: limitCores, Cores: result.StatOf(cores)}
	r.rep.Limits = res
	r.logf("   node held to cpu %.1f used %.3f cores (%.3f–%.3f) with the machine busy\n", limitCores, res.Cores.Median, res.Cores.Min, res.Cores.Max)
	return nil
}

// heldCores is the held node's CPU time over a trial divided by the trial's length, from half
// a second into the load, each sample timed at the middle of the read.
func heldCores(st *state.Store, name string, trial time.Duration) (float64, error) {
	sample := func() (float64, time.Time, error) {
		t0 := time.Now()
		info, err := substrate.Inspect(st, name)
		if err != nil {
			return 0, t0, err
		}
		for _, n := range info.Nodes {
			if n.Name == "held" && n.Usage != nil {
				return n.Usage.CPUSeconds, t0.Add(time.Since(t0) / 2), nil
			}
		}
		return 0, t0, fmt.Errorf("inspect %s: no CPU time of node held", name)
	}
	time.Sleep(500 * time.Millisecond)
	cpu1, t1, err := sample()
	if err != nil {
		return 0, err
	}
	time.Sleep(trial)
	cpu2, t2, err := sample()
	if err != nil {
		return 0, err
	}
	return (cpu2 - cpu1) / t2.Sub(t1).Seconds(), nil
}
