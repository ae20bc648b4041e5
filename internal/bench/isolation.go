package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/spec"
	"golang.org/x/sys/unix"
)

// flow2Rate is the fixed rate of the isolation part's flow 2 (iperf3 UDP), in bits per second,
// with datagrams of flow2Len bytes: about 1.2 kpps.
const (
	flow2Rate = "1M"
	flow2Len  = "64"
)

// isolation measures how much one network's load disturbs another's traffic (paper, table 4):
// networks A and B (shortbridge) forward through the same host; flow 1 (the generator, network A)
// runs at no load, at half of A's peak and at twice it; flow 2 (iperf3 UDP at a low fixed rate,
// network B) reports its loss and jitter. Each with no other load, with a CPU-bound process and
// with a disk-bound process running on the forwarding CPU.
func (r *runner) isolation() (err error) {
	iperf, lerr := exec.LookPath("iperf3")
	if lerr != nil {
		r.note("iperf3 is not installed (apt-get install iperf3): isolation not measured")
		return nil
	}
	g := r.h.NewRig(spec.Shortbridge)
	defer func() { err = errors.Join(err, g.Close()) }()
	if err := r.h.AddTrellisNet(g, "bench-iso-a", spec.Shortbridge, false); err != nil {
		return err
	}
	g.Nets = 1
	if err := g.SetFrames(r.opt.Size, r.opt.Flows); err != nil {
		return err
	}
	b, err := r.h.UpBenchNet(g, "bench-iso-b", spec.Shortbridge)
	if err != nil {
		return err
	}
	// Network B carries a real two-way flow: routes through its node under test.
	if err := setup.AddRoute(b.NS["src"], "10.2.0.0/24", setup.NutIn); err != nil {
		return err
	}
	if err := setup.AddRoute(b.NS["sink"], "10.1.0.0/24", setup.NutOut); err != nil {
		return err
	}
	if _, err := g.Trial(r.ctx, 0, warmup); err != nil {
		return err
	}
	peak := 0.0
	for _, f := range []float64{0.3, 0.5, 0.7, 0.9} {
		t, err := g.Trial(r.ctx, f*r.rep.GeneratorGuess(), r.opt.Trial)
		if err != nil {
			return err
		}
		peak = max(peak, t.Out)
	}
	dur := max(r.opt.Trial*4, time.Second)
	for _, load := range []string{"none", "cpu", "disk"} {
		stop, err := r.startLoad(load)
		if err != nil {
			return err
		}
		for _, f := range isoRates(r.opt.Quick) {
			var loss, jitter []float64
			var out, busy float64
			for rep := 0; rep < r.opt.Repeat; rep++ {
				res, err := r.isoCell(g, b, iperf, f*peak, dur)
				if err != nil {
					stop()
					return err
				}
				loss, jitter = append(loss, res.loss), append(jitter, res.jitter)
				out += res.out / float64(r.opt.Repeat)
				busy += res.busy / float64(r.opt.Repeat)
			}
			row := &result.IsoResult{Load: load, Flow1PPS: f * peak, Flow1Out: out, CPUPercent: busy * 100, Flow2Loss: result.StatOf(loss), Flow2Jitter: result.StatOf(jitter)}
			r.rep.Isolation = append(r.rep.Isolation, row)
			r.logf("   load %-4s flow 1 %s: CPU %.0f%%, flow 2 loss %.2f%% jitter %.3f ms\n", load, result.Kpps(row.Flow1PPS), row.CPUPercent, row.Flow2Loss.Median, row.Flow2Jitter.Median)
		}
		stop()
	}
	return nil
}

// isoRates are flow 1's rates, as fractions of network A's peak: none, half, twice; a quick run
// leaves out half.
func isoRates(quick bool) []float64 {
	if quick {
		return []float64{0, 2}
	}
	return []float64{0, 0.5, 2}
}

type isoMeasure struct {
	loss, jitter, out, busy float64
}

// isoCell runs flow 2 for dur while the generator offers rate on network A.
func (r *runner) isoCell(g *setup.Rig, b *setup.BenchNet, iperf string, rate float64, dur time.Duration) (isoMeasure, error) {
	var m isoMeasure
	srv, err := noderuntime.Command(b.PIDs["sink"], iperf, "-s", "-1", "-p", "5201")
	if err != nil {
		return m, err
	}
	if err := srv.Start(); err != nil {
		return m, err
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	if err := waitListening(r.ctx, b.PIDs["sink"], 5201, 10*time.Second); err != nil {
		return m, fmt.Errorf("iperf3 server: %w", err)
	}
	secs := strconv.FormatFloat(dur.Seconds(), 'f', 1, 64)
	cli, err := noderuntime.Command(b.PIDs["src"], iperf, "-c", setup.SinkIP.String(), "-p", "5201", "-u", "-b", flow2Rate, "-l", flow2Len, "-t", secs, "--json")
	if err != nil {
		return m, err
	}
	var out bytes.Buffer
	cli.Stdout = &out
	if err := cli.Start(); err != nil {
		return m, err
	}
	time.Sleep(100 * time.Millisecond) // iperf3's control connection
	meter, err := measure.StartBusy(max(r.h.FwdCPU, 0))
	if err != nil {
		return m, err
	}
	if rate > 0 {
		t, err := g.Trial(r.ctx, rate, dur)
		if err != nil {
			cli.Process.Kill()
			cli.Wait()
			return m, err
		}
		m.out = t.Out
	} else {
		time.Sleep(dur)
	}
	busy, el, _ := meter.Stop()
	m.busy = float64(busy) / float64(el)
	done := make(chan error, 1)
	go func() { done <- cli.Wait() }()
	select {
	case err = <-done:
	case <-time.After(dur + 10*time.Second):
		cli.Process.Kill()
		<-done
		return m, errors.New("iperf3 did not finish")
	}
	var res struct {
		End struct {
			Sum struct {
				Jitter float64 `json:"jitter_ms"`
				Lost   float64 `json:"lost_percent"`
			} `json:"sum"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		return m, fmt.Errorf("iperf3 (%v): its output: %w", err, jerr)
	}
	if res.Error != "" {
		return m, fmt.Errorf("iperf3: %s", res.Error)
	}
	m.loss, m.jitter = res.End.Sum.Lost, res.End.Sum.Jitter
	if math.IsNaN(m.loss) {
		m.loss = 0
	}
	return m, nil
}

// startLoad starts the other load of an isolation row on the forwarding CPU: a busy loop, or a
// loop of direct (uncached) 1 MiB writes and fsyncs to a file in the run's work directory.
// The returned function ends it. The shell's $0 names the work directory, so that setup.Clean
// finds it if the bench is killed (and Pdeathsig ends it at once).
func (r *runner) startLoad(kind string) (func(), error) {
	var cmd *exec.Cmd
	switch kind {
	case "none":
		return func() {}, nil
	case "cpu":
		cmd = exec.Command("/bin/sh", "-c", "while :; do :; done", filepath.Join(r.h.Work, "load"))
	case "disk":
		file := filepath.Join(r.h.Work, "disk-load")
		cmd = exec.Command("/bin/sh", "-c", "while :; do dd if=/dev/zero of="+file+" bs=1M count=64 oflag=direct conv=fsync status=none; done", filepath.Join(r.h.Work, "load"))
	}
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true, Pdeathsig: unix.SIGKILL} // its dd children end with it
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if r.h.FwdCPU >= 0 {
		var set unix.CPUSet
		set.Set(r.h.FwdCPU)
		unix.SchedSetaffinity(cmd.Process.Pid, &set) // inherited by dd
	}
	return func() {
		unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		cmd.Wait()
		os.Remove(filepath.Join(r.h.Work, "disk-load"))
	}, nil
}
