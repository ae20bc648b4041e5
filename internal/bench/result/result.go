// Package result holds the figures of a bench run as they are written to bench.json: the
// report, one type per part, and the statistics of repeated figures. It has no behaviour beyond
// computing those statistics, so the bench's parts (which fill it), its report renderer (which
// reads it) and anything reading a bench.json share one definition.
package result

import (
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/trellisnet/trellis/internal/bench/embedsim"
)

// Report holds every figure of a run, and the machine it ran on.
type Report struct {
	Started     time.Time        `json:"started"`
	TookSeconds float64          `json:"took_seconds"`
	Command     string           `json:"command"`
	Machine     Machine          `json:"machine"`
	Config      Config           `json:"config"`
	Generator   *GenCeiling      `json:"generator,omitempty"`
	Setups      []*SetupResult   `json:"setups,omitempty"`
	CPU         []*CPUResult     `json:"cpu,omitempty"`
	Profiles    []*ProfileResult `json:"profiles,omitempty"`
	Sizes       []*SizeResult    `json:"sizes,omitempty"`
	Scaling     []*ScaleResult   `json:"scaling,omitempty"`
	Isolation   []*IsoResult     `json:"isolation,omitempty"`
	Deploy      []*DeployResult  `json:"deploy,omitempty"`
	Apply       *ApplyResult     `json:"apply,omitempty"`   // live changes to a running chain
	Limits      *LimitsResult    `json:"limits,omitempty"`  // a CPU limit on a busy machine
	Impair      *ImpairResult    `json:"impair,omitempty"`  // configured against delivered impairments
	Delay       *DelayResult     `json:"delay,omitempty"`   // configured against delivered delay and jitter
	VM          *VMResult        `json:"vm,omitempty"`      // VM nodes: boot time, the KVM paper's knobs
	Engines     []*EnginesRow    `json:"engines,omitempty"` // parallel forwarding engines
	Cluster     *ClusterResult   `json:"cluster,omitempty"` // agents, placer and etcd over simulated machines
	// EnginesMirror is how long the FIB took to reach every engine.
	EnginesMirror []*MirrorResult    `json:"engines_mirror,omitempty"`
	Embed         []*embedsim.Result `json:"embed,omitempty"` // the offline embedding simulator
	Notes         []string           `json:"notes,omitempty"`
	// DelayGuests is the delay part run in other kernels (guests under QEMU), merged into
	// this report by hand; each says where it ran (DelayResult.Where).
	DelayGuests []*DelayResult `json:"delay_guests,omitempty"`
}

// Machine describes where the run was made.
type Machine struct {
	CPUModel string  `json:"cpu_model"`
	Cores    int     `json:"cores"`
	Kernel   string  `json:"kernel"`
	MemoryGB float64 `json:"memory_gb"`
	Load1    float64 `json:"load1_at_start"` // other work on the machine when the run began
}

// Config is how the run was made.
type Config struct {
	Quick         bool     `json:"quick"`
	Parts         []string `json:"parts"`
	Repeat        int      `json:"repeat"`
	TrialSeconds  float64  `json:"trial_seconds"`
	FrameSize     int      `json:"frame_size"`
	Flows         int      `json:"flows"`
	LossTolerance float64  `json:"loss_tolerance"`
	GeneratorCPU  int      `json:"generator_cpu"`  // -1: not pinned
	ForwardingCPU int      `json:"forwarding_cpu"` // where receive processing is steered; -1: none
	TesterCPU     int      `json:"tester_cpu"`     // tunnel setups, CPU part: where machine A works
}

// GenCeiling is what the generator offers at most, into a sink that drops (setup "direct").
type GenCeiling struct {
	Offered   Stat `json:"offered_pps"`
	Delivered Stat `json:"delivered_pps"`
}

// SetupResult holds the forwarding figures of one setup.
type SetupResult struct {
	Name          string    `json:"name"`
	Description   string    `json:"description"`
	Sweeps        [][]Trial `json:"sweeps"` // per repetition: input vs output
	Peak          Stat      `json:"peak_pps"`
	PeakRatio     *Stat     `json:"peak_ratio_to_native,omitempty"`
	ZeroLoss      Stat      `json:"zero_loss_pps"`
	ZeroLossRatio *Stat     `json:"zero_loss_ratio_to_native,omitempty"`
}

// CPUResult is the CPU cost of forwarding one frame in one setup.
type CPUResult struct {
	Setup   string  `json:"setup"`
	RatePPS float64 `json:"rate_pps"`     // offered rate during the measurement
	Raw     Stat    `json:"raw_ns"`       // forwarding CPU's NET_RX softirq time (and the relay's CPU time) per frame delivered
	Net     Stat    `json:"ns_per_frame"` // the same, less the sink's share (setup direct) where the sink is on that CPU
	Ratio   *Stat   `json:"ratio_to_native,omitempty"`
	Other   Stat    `json:"other_cpus_ns"`      // NET_RX softirq time of the other CPUs per frame (machine A in the tunnel setups)
	Relay   *Stat   `json:"relay_ns,omitempty"` // userspace: the relay's own CPU time per frame, part of Raw
	Busy    Stat    `json:"busy_ns"`            // forwarding CPU's busy time per frame by idle accounting, all work on it included
	// NodeMachineOnly: the forwarding CPU did the node under test's machine's work only (tunnel
	// setups, steered split); the rest of the path is in Other.
	NodeMachineOnly bool `json:"node_machine_only,omitempty"`
}

// SizeResult is the peak rate of one setup at one frame size.
type SizeResult struct {
	Setup string `json:"setup"`
	Size  int    `json:"size"`
	Peak  Stat   `json:"peak_pps"`
	Gbps  Stat   `json:"peak_gbps"`
	Ratio *Stat  `json:"ratio_to_native,omitempty"`
}

// ScaleResult is the aggregate rate of many virtual networks forwarding at once.
type ScaleResult struct {
	Setup     string  `json:"setup"`
	Networks  int     `json:"networks"`
	Aggregate Stat    `json:"aggregate_pps"`
	Ratio     *Stat   `json:"ratio_to_one_network,omitempty"`
	BuildSecs float64 `json:"build_seconds"`
	// Offered is what the generator handed to the sources in the trial of the best output of
	// the last repetition: below the others' offered rates, the generator is what slows.
	Offered float64 `json:"offered_pps,omitempty"`
	// Profile is where the forwarding CPU's time went at that rate (when perf is installed).
	Profile *ProfileResult `json:"profile,omitempty"`
}

// IsoResult is one row of the isolation table (Trellis paper, table 4).
type IsoResult struct {
	Load        string  `json:"load"` // none, cpu or disk
	Flow1PPS    float64 `json:"flow1_offered_pps"`
	Flow1Out    float64 `json:"flow1_delivered_pps"`
	CPUPercent  float64 `json:"forwarding_cpu_percent"`
	Flow2Loss   Stat    `json:"flow2_loss_percent"`
	Flow2Jitter Stat    `json:"flow2_jitter_ms"`
}

// DeployResult is the time to bring a chain of nodes up and down.
type DeployResult struct {
	Tool  string `json:"tool"` // trellis or mininet
	Nodes int    `json:"nodes"`
	Up    Stat   `json:"up_seconds"`
	Down  Stat   `json:"down_seconds"`
	// Memory is what one idle node costs the machine (trellis only), after the last up.
	Memory *NodeMemory `json:"idle_node_memory,omitempty"`
}

// NodeMemory is the memory of one idle node, in bytes: the machine's memory in use
// (MemTotal - MemAvailable) after up against before, per node, split into the node's init
// process (its PSS: trellis's own) and the rest (the kernel's: namespaces, devices, cgroups,
// page tables, the private directories). Other work on the machine makes Machine noisy.
// Slab is the part of it that the kernel's slab caches grew by (namespaces, devices, cgroups:
// less noisy than Machine), and Threads the mean threads of a node's init (each a host task:
// kernel.pid_max bounds them).
type NodeMemory struct {
	Machine uint64  `json:"machine_bytes"`
	Init    uint64  `json:"init_bytes"`
	Kernel  uint64  `json:"kernel_bytes"`
	Slab    uint64  `json:"slab_bytes,omitempty"`
	Threads float64 `json:"init_threads,omitempty"`
}

// LimitsResult is the CPU a node held to Limit cores used while it and an unlimited node each
// ran a busy loop per core of the machine, from the node's cgroup.
type LimitsResult struct {
	Limit float64 `json:"limit_cores"`
	Cores Stat    `json:"cores"`
}

// ApplyResult is the time of `up` on a running chain of nodes, for a file unchanged and for
// files with one change each: what a user waits for when changing a running network.
type ApplyResult struct {
	Nodes        int         `json:"nodes"`
	Load1        float64     `json:"load1_at_start"` // load average when the part began
	BuildSeconds float64     `json:"build_seconds"`  // the first up, which created the chain
	Steps        []ApplyStep `json:"steps"`
}

// ApplyStep is one kind of change, timed over the repetitions.
type ApplyStep struct {
	Change  string   `json:"change"`  // what the file changed
	Seconds Stat     `json:"seconds"` // reading and checking the file, and up
	Applied []string `json:"applied"` // what up reported it changed, in the first repetition
}

// ImpairResult is what the link impairments configured on a running link did to the frames
// sent over it.
type ImpairResult struct {
	Frames int          `json:"frames"`         // numbered frames sent per measurement
	Load1  float64      `json:"load1_at_start"` // load average when the part began
	Rows   []*ImpairRow `json:"rows"`
	Delay  string       `json:"delay"` // why delay was not measured
}

// ImpairRow is one impairment, configured and delivered. Percentages are of the frames sent
// (loss, duplicates) or of the frames that arrived (corrupted).
type ImpairRow struct {
	Config          string  `json:"config"` // as the topology file writes it
	Loss            float64 `json:"loss_percent"`
	LossCorrelation float64 `json:"loss_correlation_percent"`
	Duplicate       float64 `json:"duplicate_percent"`
	Corrupt         float64 `json:"corrupt_percent"`
	GotLoss         Stat    `json:"delivered_loss_percent"`
	GotDuplicate    Stat    `json:"delivered_duplicate_percent"`
	GotCorrupt      Stat    `json:"delivered_corrupt_percent"`
	// Bursts: the mean length in frames of runs of consecutive lost frames, as configured
	// (1/((1-C)(1-P)) for loss P with correlation C) and as delivered; rows with loss only.
	WantBurst float64 `json:"expected_loss_burst,omitempty"`
	GotBurst  *Stat   `json:"delivered_loss_burst,omitempty"`
}

// ProfileResult is where one setup's forwarding CPU spent its time.
type ProfileResult struct {
	Setup   string       `json:"setup"`
	RatePPS float64      `json:"rate_pps"` // offered rate during the profile
	Frames  float64      `json:"frames"`   // delivered during the profile
	Samples int          `json:"samples"`  // of the forwarding CPU, idle excluded
	Freq    int          `json:"freq_hz"`
	Symbols []ProfileRow `json:"symbols"` // the top kernel symbols
	Groups  []ProfileRow `json:"groups"`  // every sample, grouped by what the code does
}

// ProfileRow is a symbol or group's share of the forwarding CPU's busy samples, and its cost per
// frame delivered.
type ProfileRow struct {
	Name       string  `json:"name"`
	Percent    float64 `json:"percent"`
	NSPerFrame float64 `json:"ns_per_frame"`
}

// Trial is one run of the generator at one offered rate.
type Trial struct {
	Offered float64 `json:"offered_pps"` // what the generator was asked for; 0: as fast as it can
	In      float64 `json:"in_pps"`      // what the generator handed to the source interface (some refused by the next hop)
	Out     float64 `json:"out_pps"`     // what the sink counted
	Loss    float64 `json:"loss"`        // 1 - out/in
	Frames  uint64  `json:"-"`           // counted at the sink
}

// PeakOf is the highest output rate among trials.
func PeakOf(ts []Trial) float64 {
	p := 0.0
	for _, t := range ts {
		p = max(p, t.Out)
	}
	return p
}

// Stat is a figure repeated: its median, minimum and maximum, and every value.
type Stat struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"`
}

// StatOf is the statistics of repeated values; a value that could not be measured (NaN or
// infinite) is left out, as JSON has no NaN.
func StatOf(vs []float64) Stat {
	var ok []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			ok = append(ok, v)
		}
	}
	s := Stat{Values: ok}
	if len(ok) == 0 {
		return s
	}
	ok = append([]float64(nil), ok...)
	sort.Float64s(ok)
	s.Min, s.Max = ok[0], ok[len(ok)-1]
	if n := len(ok); n%2 == 1 {
		s.Median = ok[n/2]
	} else {
		s.Median = (ok[n/2-1] + ok[n/2]) / 2
	}
	return s
}

// RatioStat divides a's values by b's of the same repetition.
func RatioStat(a, b []float64) *Stat {
	var rs []float64
	for i := range a {
		if i < len(b) && b[i] > 0 {
			rs = append(rs, a[i]/b[i])
		} else {
			rs = append(rs, math.NaN())
		}
	}
	s := StatOf(rs)
	return &s
}

// GeneratorGuess is the generator's full rate if the run measured it, else a modest rate.
func (rep *Report) GeneratorGuess() float64 {
	if rep.Generator != nil && rep.Generator.Offered.Median > 0 {
		return rep.Generator.Offered.Median
	}
	return 500e3
}

// FormatF formats v with prec decimals.
func FormatF(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

// Kpps formats a rate in frames per second as kpps, or Mpps from a million on.
func Kpps(v float64) string {
	if v >= 1e6 {
		return FormatF(v/1e6, 2) + " Mpps"
	}
	return FormatF(v/1e3, 1) + " kpps"
}

// EnginesRow is one node set-up of the engines part: a plain node (Engines 0) or a node with
// forwarding engines and a dispatch, with a FIB of FIBPrefixes routes besides its own.
type EnginesRow struct {
	Engines              int      `json:"engines"`
	Dispatch             string   `json:"dispatch"`
	FIBPrefixes          int      `json:"fib_prefixes"`
	PeakPPS              float64  `json:"peak_pps"`                 // median over the repetitions, 64-byte frames, 64 flows
	PeakRatioToOneEngine float64  `json:"peak_ratio_to_one_engine"` // to the 1-engine row of the same FIB (plain: the 1-engine row to it, inverted)
	TCPMbps              float64  `json:"tcp_mbps"`                 // iperf3, one stream
	ReorderRatio         float64  `json:"reorder_ratio"`            // RFC 4737 reordered ratio of one numbered flow at the sink
	RTTOverheadUS        float64  `json:"rtt_overhead_us"`          // ping's mean RTT minus the plain node's
	RTTUS                float64  `json:"rtt_us"`
	PerEngine            []uint64 `json:"per_engine,omitempty"`  // frames each engine received during the peak trials
	EngineCPUs           []int    `json:"engine_cpus,omitempty"` // the core each engine's receive processing is steered to
	// SoftirqBusy is, per core, the share of the peak trials' time it spent in the NET_RX
	// softirq, where forwarding (the node's or its engines') runs: where the cores go.
	SoftirqBusy []float64 `json:"softirq_busy,omitempty"`
}

// MirrorResult is the time from the first of Routes route changes made in the control node to
// the last of them present in every one of Engines engines.
type MirrorResult struct {
	Routes  int     `json:"routes"`
	Engines int     `json:"engines"`
	Seconds float64 `json:"seconds"`
	Apply   float64 `json:"apply_seconds"` // what `ip -batch` took in the control node
}
