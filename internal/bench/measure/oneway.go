package measure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// oneWayMagic marks a one-way probe frame: its payload carries the magic, its number and the
// time it was sent.
const oneWayMagic = 0x54524f57 // "TROW"

// OneWayRun is what a one-way probe found.
type OneWayRun struct {
	Delays []time.Duration // of the frames that arrived, in the order they were sent
	Lost   int
	Span   time.Duration // from the first frame's arrival to the last's
}

// OneWay sends n copies of frame base (a UDP frame of UDPFrames) from tx, one every gap (0: as
// fast as it can), each numbered and stamped with the time it was sent, and returns the
// one-way delay of each that arrived on interface rxIf of namespace rxNS: from the moment
// before it was sent to the receiving kernel's timestamp, so that neither end's scheduling
// counts.
func OneWay(ctx context.Context, tx *TxPort, rxNS netns.NsHandle, rxIf string, base []byte, n int, gap time.Duration) (*OneWayRun, error) {
	if len(base) < HeaderLen+16 {
		return nil, fmt.Errorf("one-way probe: frame of %d bytes, want at least %d", len(base), HeaderLen+16)
	}
	fd, err := probeSocket(rxNS, rxIf)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return nil, fmt.Errorf("SO_TIMESTAMPNS: %w", err)
	}
	rx := &oneWayRx{got: make([]time.Duration, n)}
	for i := range rx.got {
		rx.got[i] = -1
	}
	done := make(chan struct{})
	recvErr := make(chan error, 1)
	go func() { recvErr <- rx.receive(fd, done) }()
	f := slices.Clone(base)
	next := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if gap > 0 {
			time.Sleep(time.Until(next))
			next = next.Add(gap)
		}
		binary.BigEndian.PutUint32(f[HeaderLen:], oneWayMagic)
		binary.BigEndian.PutUint32(f[HeaderLen+4:], uint32(i))
		binary.BigEndian.PutUint64(f[HeaderLen+8:], uint64(time.Now().UnixNano()))
		tx.SetFrames([][]byte{f})
		if _, err := tx.send(1); err != nil {
			close(done)
			<-recvErr
			return nil, err
		}
	}
	close(done)
	if err := errors.Join(<-recvErr, ctx.Err()); err != nil {
		return nil, err
	}
	run := &OneWayRun{Span: time.Duration(rx.last - rx.first)}
	for _, d := range rx.got {
		if d < 0 {
			run.Lost++
		} else {
			run.Delays = append(run.Delays, d)
		}
	}
	return run, nil
}

// oneWayRx is the receiving end of a one-way probe: got[i] is the delay of frame i (-1 until it
// arrives), first and last the first and last arrival (CLOCK_REALTIME, ns).
type oneWayRx struct {
	got         []time.Duration
	first, last int64
}

// receive fills rx until done is closed and nothing more arrives for a few read timeouts.
func (rx *oneWayRx) receive(fd int, done <-chan struct{}) error {
	got := rx.got
	buf, oob := make([]byte, MaxFrame+64), make([]byte, 128)
	idle := 0
	for {
		n, oobn, _, from, err := unix.Recvmsg(fd, buf, oob, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			select {
			case <-done:
				if idle++; idle >= 3 {
					return nil
				}
			default:
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("receiving: %w", err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		idle = 0
		if n < HeaderLen+16 || binary.BigEndian.Uint32(buf[HeaderLen:]) != oneWayMagic {
			continue
		}
		seq := int(binary.BigEndian.Uint32(buf[HeaderLen+4:]))
		sent := int64(binary.BigEndian.Uint64(buf[HeaderLen+8:]))
		at, ok := rxTime(oob[:oobn])
		if seq < len(got) && ok && got[seq] < 0 {
			got[seq] = time.Duration(at - sent)
			if rx.first == 0 {
				rx.first = at
			}
			rx.last = at
		}
	}
}

// rxTime is the kernel's receive timestamp of a frame (CLOCK_REALTIME, ns).
func rxTime(oob []byte) (int64, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			return (*unix.Timespec)(unsafe.Pointer(&m.Data[0])).Nano(), true
		}
	}
	return 0, false
}

// DelayStats summarises one-way delays.
type DelayStats struct {
	N                          int
	Median, P99, Mean, SD, Min time.Duration
}

// StatsOf summarises delays (which it sorts).
func StatsOf(delays []time.Duration) DelayStats {
	s := DelayStats{N: len(delays)}
	if len(delays) == 0 {
		return s
	}
	slices.Sort(delays)
	var sum, sq float64
	for _, d := range delays {
		sum += float64(d)
		sq += float64(d) * float64(d)
	}
	mean := sum / float64(len(delays))
	s.Mean, s.SD = time.Duration(mean), time.Duration(math.Sqrt(max(sq/float64(len(delays))-mean*mean, 0)))
	s.Median, s.P99, s.Min = Quantile(delays, 0.5), Quantile(delays, 0.99), delays[0]
	return s
}

// Quantile is the q-quantile of sorted delays (the nearest rank).
func Quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
