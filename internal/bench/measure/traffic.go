package measure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
)

// Traffic is a generator and the sink that counts its frames: one path (or many paths in
// parallel) to measure through.
type Traffic struct {
	Gen  *Generator
	Sink *Sink
	tag  uint16 // the current trial's number, carried in its frames
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

// ErrInterrupted is returned by a trial asked to stop (its context was cancelled).
var ErrInterrupted = errors.New("interrupted")

// drain waits for frames in flight to reach the sink, and returns the sink's count then.
func (t *Traffic) drain() (uint64, error) {
	start := time.Now()
	last, _, err := t.Sink.Read()
	if err != nil {
		return 0, err
	}
	still := time.Now()
	for time.Since(start) < drainMax {
		time.Sleep(2 * time.Millisecond)
		n, _, err := t.Sink.Read()
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
func (t *Traffic) nextTrial() error {
	t.tag++
	if t.tag == 0 { // a frame too short to carry a tag reads as 0
		t.tag = 1
	}
	for _, p := range t.Gen.Ports {
		for _, f := range p.frames {
			tagFrame(f, t.tag)
		}
	}
	return t.Sink.SetTrial(t.tag)
}

// Trial offers rate frames per second (0: as many as the generator can) for dur. A cancelled
// ctx stops the run before the next trial starts (ErrInterrupted).
func (t *Traffic) Trial(ctx context.Context, rate float64, dur time.Duration) (result.Trial, error) {
	if ctx.Err() != nil {
		return result.Trial{}, fmt.Errorf("%w (%v)", ErrInterrupted, context.Cause(ctx))
	}
	if err := t.nextTrial(); err != nil {
		return result.Trial{}, err
	}
	out0, _, err := t.Sink.Read()
	if err != nil {
		return result.Trial{}, err
	}
	// The input is what the generator handed to the kernel: every frame either crossed into the
	// next hop or was refused there, which is loss. (Not the source veth's counters: recent
	// kernels count a frame that the peer refused both in tx_packets and in tx_dropped.)
	t0 := time.Now()
	sent, err := t.Gen.Run(rate, dur)
	if err != nil {
		return result.Trial{}, err
	}
	el := time.Since(t0).Seconds()
	out1, err := t.drain()
	if err != nil {
		return result.Trial{}, err
	}
	tr := result.Trial{Offered: rate, In: float64(sent) / el, Out: float64(out1-out0) / el, Frames: out1 - out0}
	if tr.In > 0 {
		tr.Loss = max(0, 1-tr.Out/tr.In)
	}
	return tr, nil
}
