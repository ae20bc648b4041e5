package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"golang.org/x/sys/unix"
)

func (r *runner) newReport() *result.Report {
	o := r.opt
	return &result.Report{
		Started: time.Now().UTC(),
		Command: strings.Join(os.Args, " "),
		Machine: machine(),
		Config: result.Config{Quick: o.Quick, Parts: o.Parts, Repeat: o.Repeat, TrialSeconds: o.Trial.Seconds(),
			FrameSize: o.Size, Flows: o.Flows, LossTolerance: o.LossTolerance, GeneratorCPU: r.h.GenCPU,
			ForwardingCPU: r.h.FwdCPU, TesterCPU: r.h.TesterCPU()},
	}
}

// machine describes this machine.
func machine() result.Machine {
	m := result.Machine{Cores: runtime.NumCPU()}
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
	m.Load1 = load1()
	return m
}

// load1 is the machine's load average over the last minute, 0 if unknown.
func load1() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
