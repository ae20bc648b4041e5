package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/trellisnet/trellis/internal/bench"
	"github.com/trellisnet/trellis/internal/bench/embedsim"
	"github.com/trellisnet/trellis/internal/bench/report"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/helperproc"
	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/progress"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
)

// benchLong is the help of trellis-bench.
const benchLong = `Measure how fast this machine forwards through virtual networks, as the Trellis paper did:
a generator in a source namespace sends UDP frames through one node under test to a sink that
counts and drops them, for each setup in turn (native kernel forwarding with no trellis; trellis
nodes joined by default links (veth: one veth pair, no port; veth-impair: the same with a loss of
0.001%, done by tcx programs on Linux 6.6+; rate: a 10 Gbit/s cap, which gives the link ports and
a shaper), or by shortbridge or bridge connectors; a user-space relay in a trellis node; and
links that cross two simulated machines in EGRE or VXLAN tunnels; with --setups, egre3-shortbridge
and egre3-bridge, the paper's router under test: source, node and sink each on a simulated machine
of its own, the node's machine alone on the forwarding CPU, whose CPU per frame the cpu part gives;
shortbridge-tcx (the shortbridge's port programs on tcx, TRELLIS_PORT_HOOK=tcx, instead of as
tc filters under clsact); the prototype shortbridge-xdp (XDP on the ports, redirecting through
a device map); and VM nodes under test, vm-tap, vm-macvtap and vm-bridge (one per interconnect)
and vm-pvr (a VM with two engine VMs, parallel virtual routers, at least 8 flows), functional
only without KVM).
The scaling part also profiles each network count when perf is installed.
Ratios to native are taken within the same run. The bench builds its own networks in a state
directory of its own (in its work directory, TMPDIR/trellis-bench-ID) and removes everything it
made before it exits. It records itself in STATE_DIR/bench/ while it runs; if it is killed
(kill -9), the next ` + "`trellis-bench`" + ` (or ` + "`trellis-bench clean`" + `) removes what it left behind:
its simulated machines (network namespaces trbenchID-...), trellis nodes and devices, processes
and work directory, touching nothing else. It leaves the networks of --state-dir alone.
The bench builds its networks with trellis's own code, but what trellis runs as processes of
its own (the simulated machines' trellis and agents, the nodes' helpers, a VM guest's agent) is
the trellis binary: --trellis, by default the one beside trellis-bench (bin/trellis), else
trellis on PATH.

Writes OUT/bench.json with every figure and the machine, PNG plots into OUT, and with
--markdown a page with the tables and plots (scripts/bench.sh makes docs/benchmarks.md so).
The deploy part also reports the memory of an idle node. The limits part holds a node to
cpu 0.5 while it and an unlimited node each run a busy loop per core, and reports the held
node's cores from its cgroup (0.5 ± 0.05 is the goal).
The apply part times ` + "`up`" + ` on a running chain of 1000 nodes (100 with --quick): the same file,
one link's rate changed, one node added at the end, and that node removed. The impair part sets
loss (1, 10, 30 %, and 10 % with 50 % correlation), duplication and corruption on a running link
and counts what 20000 numbered frames (2000 with --quick) met. The delay part sets delay 1, 10
and 100 ms and a normal jitter (20 ms ± 4 ms) on a link capped at 1, 10 and 100 Mbit/s (10 with
--quick; --delay-rates) and measures the one-way delay of 1000 probe frames (200; --delay-frames)
each (median, p99, mean, sd),
then the ceiling: full frames as fast as one sender can, without and with a 1 ms delay (netem,
or trellis's delay line on a kernel without netem).
The engines part measures a node with 1 to 3 parallel forwarding engines under each dispatch
against a plain node (peak rate, TCP, reordering, RTT) and how long 1000 routes (and, without
--quick, a 170 000-prefix table) take to reach every engine (docs/engines.md).
The cluster part is opt-in (--parts cluster; it needs the etcd that scripts/setup.sh builds):
3 simulated machines each with an agent, a 3-member etcd and a placer; it times up --cluster to
every agent converged for 1 and 100 networks of 10 nodes (5 with --quick, --cluster-networks N), counts etcd's writes
per network, and times the failover after a machine is lost (agents' lease 3s) (docs/cluster.md).
--quick runs every part but the opt-in ones, shorter and fewer times, in under two minutes. An unknown name in
--parts or --setups is an error that lists the known ones.
--parts embed runs the offline embedding simulator, which needs no root (docs/embedding.md).`

// benchFlags are the flags of trellis-bench.
type benchFlags struct {
	quick                        bool
	out, markdown, parts, setups string
	repeat, size, flows          int
	clusterNetworks              int
	trial                        time.Duration
	sizes, networks, chains      string
	delayRates                   string
	delayFrames                  int
	mininet                      bool
	traces                       []string
	wtrace, trellis              string
}

// newRoot returns the trellis-bench command with its sub-commands.
func newRoot() *cobra.Command {
	var bf benchFlags
	var stateDir string
	cmd := &cobra.Command{
		Use:           "trellis-bench",
		Short:         "Measure forwarding, scaling, isolation, deploy speed, live changes, impairments and delay on this machine",
		Long:          benchLong,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return bf.run(cmd, stateDir)
		},
	}
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", state.DefaultDir, "directory where trellis records what it creates (the bench records its runs in STATE_DIR/bench/)")
	def := bench.DefaultOptions()
	f := cmd.Flags()
	f.BoolVar(&bf.quick, "quick", false, "every part, fewer and shorter trials: under two minutes")
	f.StringVar(&bf.out, "out", "bench-results", "directory for bench.json and the plots")
	f.StringVar(&bf.markdown, "markdown", "", "also write the tables and plots as a Markdown page to this file")
	f.StringVar(&bf.parts, "parts", strings.Join(def.Parts, ","), "parts to run, of "+strings.Join(bench.AllParts, ", "))
	f.StringVar(&bf.setups, "setups", strings.Join(def.Setups, ","), "forwarding setups (besides direct, the generator's ceiling), of "+strings.Join(setup.Names(), ", "))
	f.IntVar(&bf.repeat, "repeat", def.Repeat, "how many times each figure is measured (2 with --quick)")
	f.DurationVar(&bf.trial, "trial", def.Trial, "length of one generator run (250ms with --quick)")
	f.IntVar(&bf.size, "size", def.Size, "Ethernet frame size in bytes, without FCS")
	f.IntVar(&bf.flows, "flows", def.Flows, "UDP flows (source ports) per virtual network")
	f.StringVar(&bf.sizes, "sizes", joinInts(def.Sizes), "frame sizes of the sizes part (64,1500 with --quick)")
	f.StringVar(&bf.networks, "networks", joinInts(def.Networks), "parallel virtual networks of the scaling part (1,8 with --quick)")
	f.StringVar(&bf.chains, "chains", joinInts(def.Chains), "chain lengths (nodes) of the deploy part (10 with --quick)")
	f.StringVar(&bf.delayRates, "delay-rates", strings.Join(def.DelayRates, ","), "link rates of the delay part (10mbit with --quick)")
	f.IntVar(&bf.delayFrames, "delay-frames", def.DelayFrames, "probe frames per row of the delay part (200 with --quick); the ceiling sends 50 times as many")
	f.IntVar(&bf.clusterNetworks, "cluster-networks", def.ClusterNetworks, "networks of the cluster part's larger up and of its failover (5 with --quick)")
	f.BoolVar(&bf.mininet, "mininet", def.Mininet, "time Mininet on the same chains when it is installed")
	f.StringArrayVar(&bf.traces, "trace", nil, "embed part: replay this trace file instead of generated workloads (repeatable)")
	f.StringVar(&bf.wtrace, "write-trace", "", "embed part: write each generated instance to FILE-WORKLOAD-SEED.json")
	f.StringVar(&bf.trellis, "trellis", "", "the trellis binary the bench runs (default: trellis beside trellis-bench, else on PATH)")
	cmd.AddCommand(relayCmd(), reportCmd(), cleanCmd(&stateDir))
	return cmd
}

// run is a bench run: every part but embed (which needs no root, no state directory and no
// trellis binary) through bench.Run, then embed; it writes what it measured (write).
func (bf *benchFlags) run(cmd *cobra.Command, stateDir string) error {
	opt, runEmbed, err := bf.options(cmd.Flags())
	if err != nil {
		return err
	}
	opt.Log = cmd.ErrOrStderr()
	if len(opt.Parts) > 0 {
		if opt.Trellis, err = findTrellis(bf.trellis, opt.Log); err != nil {
			return err
		}
		// The nodes' helpers and a VM guest's agent are trellis re-executed: the trellis binary.
		helperproc.SetExecutable(opt.Trellis)
		st, err := state.Open(stateDir)
		if err != nil {
			return err
		}
		opt.StateDir = st.Dir
	}
	if err := os.MkdirAll(bf.out, 0o755); err != nil {
		return err
	}
	// Ctrl-C or SIGTERM stops the run at the end of the current trial; the setups are torn
	// down as after a failure.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, runErr := &result.Report{Started: time.Now()}, error(nil)
	if len(opt.Parts) > 0 {
		rep, runErr = runParts(ctx, cmd.ErrOrStderr(), opt)
	}
	if rep == nil {
		return runErr
	}
	if runEmbed && runErr == nil {
		rep.Embed, runErr = embedsim.RunCLI(ctx, embedsim.Options{Quick: bf.quick, Traces: bf.traces, WriteTrace: bf.wtrace, Log: opt.Log}, bf.out)
	}
	return bf.write(cmd.OutOrStdout(), rep, runErr)
}

// runParts is bench.Run with a status line on out when it is a terminal (internal/progress),
// the run's log lines above it.
func runParts(ctx context.Context, out io.Writer, opt bench.Options) (*result.Report, error) {
	if t := progress.New(out, opt.Log); t != nil {
		defer t.Close()
		opt.Log = t
	}
	return bench.Run(ctx, opt)
}

// options are the bench's options with the flags given on the command line; runEmbed tells
// whether the embed part (run apart from the others) is among the parts.
func (bf *benchFlags) options(f *pflag.FlagSet) (opt bench.Options, runEmbed bool, err error) {
	opt = bench.DefaultOptions()
	if bf.quick {
		opt = bench.QuickOptions()
	}
	// The machine's choices for the networks the bench puts up itself, from the environment as
	// trellis takes them (its flags' defaults), which the trellis it runs inherits.
	opt.Substrate = substrate.Options{PortNS: os.Getenv(substrate.PortNSEnv), Delay: os.Getenv(substrate.DelayEnv),
		Dataplane:  dataplane.Config{PortHook: os.Getenv(dataplane.HookEnv), PerFrameRoute: os.Getenv(dataplane.EncapRouteEnv) == "per-frame"},
		ImageCache: os.Getenv(image.CacheEnv)}
	if f.Changed("parts") {
		opt.Parts = splitList(bf.parts)
	}
	if f.Changed("setups") {
		opt.Setups = splitList(bf.setups)
	}
	if f.Changed("repeat") {
		opt.Repeat = bf.repeat
	}
	if f.Changed("trial") {
		opt.Trial = bf.trial
	}
	if f.Changed("size") {
		opt.Size = bf.size
	}
	if f.Changed("flows") {
		opt.Flows = bf.flows
	}
	if f.Changed("mininet") {
		opt.Mininet = bf.mininet
	}
	if f.Changed("delay-rates") {
		opt.DelayRates = splitList(bf.delayRates)
	}
	if f.Changed("delay-frames") {
		opt.DelayFrames = bf.delayFrames
	}
	if f.Changed("cluster-networks") {
		opt.ClusterNetworks = bf.clusterNetworks
	}
	for _, l := range []struct {
		flag string
		text string
		dst  *[]int
	}{{"sizes", bf.sizes, &opt.Sizes}, {"networks", bf.networks, &opt.Networks}, {"chains", bf.chains, &opt.Chains}} {
		if f.Changed(l.flag) {
			if *l.dst, err = intList(l.text); err != nil {
				return opt, false, fmt.Errorf("--%s: %w", l.flag, err)
			}
		}
	}
	opt.Parts, runEmbed = embedsim.TakePart(opt.Parts)
	return opt, runEmbed, opt.Check()
}

// write saves a run's figures as OUT/bench.json, even those of a run that failed (runErr),
// then, after a run that did not, the plots, the Markdown page and a summary on w.
func (bf *benchFlags) write(w io.Writer, rep *result.Report, runErr error) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	jsonPath := filepath.Join(bf.out, "bench.json")
	if err := os.WriteFile(jsonPath, append(data, '\n'), 0o644); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("%w (figures so far in %s)", runErr, jsonPath)
	}
	if err := report.Plot(rep, bf.out); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	if bf.markdown != "" {
		if err := report.WriteMarkdown(rep, bf.markdown, bf.out); err != nil {
			return err
		}
	}
	report.Summary(w, rep)
	fmt.Fprintf(w, "figures: %s\n", jsonPath)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func intList(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		v, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}
