package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Trial is one run of the generator at one offered rate.
type Trial struct {
	Offered float64 `json:"offered_pps"` // what the generator was asked for; 0: as fast as it can
	In      float64 `json:"in_pps"`      // what the generator handed to the source interface (some refused by the next hop)
	Out     float64 `json:"out_pps"`     // what the sink counted
	Loss    float64 `json:"loss"`        // 1 - out/in
	frames  uint64  // counted at the sink
}

// After the generator stops, frames still in flight (receive backlogs hold up to
// net.core.netdev_max_backlog frames per CPU, and a path may queue a frame several times) get
// to reach the sink before the trial is counted: until the sink's count has not moved for
// drainQuiet, at most drainMax. Otherwise a trial that overloaded a slow path would hand its
// queued frames to the next trial, whose output would then exceed its input.
const (
	drainQuiet = 10 * time.Millisecond
	drainMax   = 500 * time.Millisecond
)

// drain waits for frames in flight to reach the sink, and returns the sink's count then.
func (g *rig) drain() (uint64, error) {
	start := time.Now()
	last, _, err := g.sink.read()
	if err != nil {
		return 0, err
	}
	still := time.Now()
	for time.Since(start) < drainMax {
		time.Sleep(2 * time.Millisecond)
		n, _, err := g.sink.read()
		if err != nil {
			return 0, err
		}
		if n != last {
			last, still = n, time.Now()
		} else if time.Since(still) >= drainQuiet {
			break
		}
	}
	return last, nil
}

// nextTrial tags the generator's frames with a new trial number and makes the sink count those.
func (g *rig) nextTrial() error {
	g.tag++
	if g.tag == 0 { // a frame too short to carry a tag reads as 0
		g.tag = 1
	}
	for _, p := range g.gen.ports {
		for _, f := range p.frames {
			tagFrame(f, g.tag)
		}
	}
	return g.sink.setTrial(g.tag)
}

// trial offers rate frames per second (0: as many as the generator can) for dur.
func (g *rig) trial(rate float64, dur time.Duration) (Trial, error) {
	if interrupted.Load() {
		return Trial{}, errors.New("interrupted")
	}
	if err := g.nextTrial(); err != nil {
		return Trial{}, err
	}
	out0, _, err := g.sink.read()
	if err != nil {
		return Trial{}, err
	}
	// The input is what the generator handed to the kernel: every frame either crossed into the
	// next hop or was refused there, which is loss. (Not the source veth's counters: recent
	// kernels count a frame that the peer refused both in tx_packets and in tx_dropped.)
	t0 := time.Now()
	sent, err := g.gen.run(rate, dur)
	if err != nil {
		return Trial{}, err
	}
	el := time.Since(t0).Seconds()
	out1, err := g.drain()
	if err != nil {
		return Trial{}, err
	}
	t := Trial{Offered: rate, In: float64(sent) / el, Out: float64(out1-out0) / el, frames: out1 - out0}
	if t.In > 0 {
		t.Loss = max(0, 1-t.Out/t.In)
	}
	return t, nil
}

// peakOf is the highest output rate among trials.
func peakOf(ts []Trial) float64 {
	p := 0.0
	for _, t := range ts {
		p = max(p, t.Out)
	}
	return p
}

// idleTime returns how long cpu has been idle (idle and iowait of /proc/stat). With a tickless
// kernel (NO_HZ, the default) this is measured at every entry to and exit from idle, not
// sampled at ticks, so it is exact to the 10 ms unit of /proc/stat; the busy fields (user,
// system, softirq) are sampled at ticks unless the kernel has IRQ_TIME_ACCOUNTING, so busy time
// is taken as elapsed time less idle time.
func idleTime(cpu int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	want := "cpu" + strconv.Itoa(cpu) + " "
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, want) {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 {
			break
		}
		idle, _ := strconv.ParseUint(f[4], 10, 64)
		iowait, _ := strconv.ParseUint(f[5], 10, 64)
		return time.Duration(idle+iowait) * time.Second / userHZ, nil
	}
	return 0, fmt.Errorf("/proc/stat has no cpu%d", cpu)
}

// userHZ is the unit of /proc/stat: 100 on every Linux architecture that trellis runs on.
const userHZ = 100

// busyMeter measures how long one CPU was busy over an interval.
type busyMeter struct {
	cpu  int
	t0   time.Time
	idle time.Duration
}

func startBusy(cpu int) (*busyMeter, error) {
	idle, err := idleTime(cpu)
	return &busyMeter{cpu: cpu, t0: time.Now(), idle: idle}, err
}

// stop returns the busy time and the elapsed time since start.
func (m *busyMeter) stop() (busy, elapsed time.Duration, err error) {
	idle, err := idleTime(m.cpu)
	elapsed = time.Since(m.t0)
	return max(0, elapsed-(idle-m.idle)), elapsed, err
}

// Stat is a figure repeated: its median, minimum and maximum, and every value.
type Stat struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"`
}

func statOf(vs []float64) Stat {
	var ok []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			ok = append(ok, v)
		}
	}
	s := Stat{Values: ok} // JSON has no NaN: a value that could not be measured is left out
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
