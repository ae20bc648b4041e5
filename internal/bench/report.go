package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/embed"
	"golang.org/x/sys/unix"
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
	Embed       []*embed.Result  `json:"embed,omitempty"` // --parts embed: internal/bench/embed
	Notes       []string         `json:"notes,omitempty"`
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
}

func newReport(opt Options, r *runner) *Report {
	return &Report{
		Started: time.Now().UTC(),
		Command: strings.Join(os.Args, " "),
		Machine: machine(),
		Config: Config{Quick: opt.Quick, Parts: opt.Parts, Repeat: opt.Repeat, TrialSeconds: opt.Trial.Seconds(),
			FrameSize: opt.Size, Flows: opt.Flows, LossTolerance: opt.LossTolerance, GeneratorCPU: r.genCPU, ForwardingCPU: r.fwdCPU, TesterCPU: r.testerCPU()},
	}
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.MemoryGB = float64(si.Totalram) * float64(si.Unit) / (1 << 30)
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) > 0 {
			m.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	return m
}

func (r *runner) note(format string, args ...any) {
	r.rep.Notes = append(r.rep.Notes, strings.TrimSpace(fmt.Sprintf(format, args...)))
	r.logf("   note: "+format+"\n", args...)
}

func formatF(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
