package measure

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The probe sends numbered frames through a link from a transmit port (the generator's packet
// socket) and counts every copy that arrives on the far interface, on a packet socket there
// that sees all frames before the far node's IP stack does: corrupted frames too, which IP
// would drop. It keeps at most probeWindow frames on their way, so no queue on the path
// overflows (which would count as loss of the link) however busy the machine is.

const (
	probeBurst  = 64 // frames per sendmmsg
	probeWindow = 256
	// probeStall bounds the wait for a burst to arrive: a burst's last frames may be lost.
	probeStall = 20 * time.Millisecond
	probeIdle  = 100 * time.Millisecond // the receiver's read timeout
)

// ErrProbeVoid: frames were lost outside the link under test, so the measurement says
// nothing about the link.
var ErrProbeVoid = errors.New("probe measurement void")

// Probe sends frames (from SeqFrames) over tx and counts what arrives on interface rxIf of
// namespace rxNS.
func Probe(ctx context.Context, tx *TxPort, rxNS netns.NsHandle, rxIf string, frames [][]byte) (*Tally, error) {
	return probe(ctx, tx, rxNS, rxIf, NewTally(frames))
}

// ProbeRouted is Probe through routers: the frames arrive with other MAC addresses, TTL and
// checksum, so only their payloads are compared.
func ProbeRouted(ctx context.Context, tx *TxPort, rxNS netns.NsHandle, rxIf string, frames [][]byte) (*Tally, error) {
	t := NewTally(frames)
	t.routed = true
	return probe(ctx, tx, rxNS, rxIf, t)
}

func probe(ctx context.Context, tx *TxPort, rxNS netns.NsHandle, rxIf string, t *Tally) (*Tally, error) {
	frames := t.sent
	fd, err := probeSocket(rxNS, rxIf)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var seen atomic.Int64 // highest frame number seen + 1
	done := make(chan struct{})
	var rxErr error
	var wg sync.WaitGroup
	wg.Go(func() { rxErr = t.receive(fd, &seen, done) })
	sendErr := sendWindowed(ctx, tx, frames, &seen)
	close(done)
	wg.Wait()
	if err := errors.Join(sendErr, rxErr); err != nil {
		return nil, err
	}
	if tx.refused > 0 {
		return nil, fmt.Errorf("%w: the link's first hop refused %d frames", ErrProbeVoid, tx.refused)
	}
	st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return nil, fmt.Errorf("receiving socket's statistics: %w", err)
	}
	if st.Drops != 0 {
		return nil, fmt.Errorf("%w: the receiving socket dropped %d frames", ErrProbeVoid, st.Drops)
	}
	return t, nil
}

// probeSocket opens a packet socket for every frame that arrives on ifname in ns, with a
// buffer large enough for all the frames of a probe and a short read timeout.
func probeSocket(ns netns.NsHandle, ifname string) (int, error) {
	fd := -1
	err := netnsutil.Do(ns, func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL))); err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		ifi, err := interfaceIndex(ifname)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi})
	})
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
	}
	if err == nil {
		tv := unix.NsecToTimeval(probeIdle.Nanoseconds())
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}
	if err != nil && fd >= 0 {
		unix.Close(fd)
	}
	return fd, err
}

// receive counts frames arriving on fd until done is closed and nothing more arrives for a few
// read timeouts; seen follows the highest frame number that arrived.
func (t *Tally) receive(fd int, seen *atomic.Int64, done <-chan struct{}) error {
	buf := make([]byte, MaxFrame+64)
	idle := 0
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
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
			continue // the far node's own frames
		}
		idle = 0
		if seq := t.Add(buf[:n]); int64(seq+1) > seen.Load() {
			seen.Store(int64(seq + 1))
		}
	}
}

// sendWindowed sends frames in bursts, each when the frames sent before it, but for a window,
// have arrived (or after probeStall: the last frames may have been lost).
func sendWindowed(ctx context.Context, tx *TxPort, frames [][]byte, seen *atomic.Int64) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tx.SetFrames(frames)
	for sent := 0; sent < len(frames); {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		for int64(sent)-seen.Load() > probeWindow-probeBurst && time.Since(t0) < probeStall {
			time.Sleep(50 * time.Microsecond)
		}
		n := min(probeBurst, len(frames)-sent)
		if _, err := tx.send(n); err != nil {
			return err
		}
		sent += n
	}
	return nil
}
