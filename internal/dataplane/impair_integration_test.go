//go:build integration

package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The impairment tests use the link of TestShortbridge (two namespaces, two
// ports joined by the shortbridge), with impairments on port A: frames from
// A to B are impaired, frames from B to A are not.

// impairFrames is the frames sent per case. The tolerances below are at least four standard
// deviations of the rates they check at this count: with 20000 frames, 30 % loss's ±1 % was
// three (0.32 % each), and CI once drew 28.95 %.
const impairFrames = 50000

// impairedLink builds the test link with the shortbridge in redirect mode,
// and records every impairment program it will see for the final check.
func impairedLink(t *testing.T) *testLink {
	t.Helper()
	l := setupTestLink(t)
	if err := AttachShortbridge(cfg, l.a.port, l.b.port, false); err != nil {
		t.Fatal(err)
	}
	if err := AttachShortbridge(cfg, l.b.port, l.a.port, false); err != nil {
		t.Fatal(err)
	}
	return l
}

func impairA(t *testing.T, l *testLink, im Impairment) {
	t.Helper()
	if err := SetImpairment(cfg, l.a.port, im); err != nil {
		t.Fatal(err)
	}
	if id := impairID(t, l.a.port); id != 0 {
		l.progIDs = append(l.progIDs, id)
	}
}

// impairID returns the id of the impairment program on the port's ingress (tcx or clsact),
// 0 if there is none.
func impairID(t *testing.T, port int) ebpf.ProgramID {
	t.Helper()
	at, err := findImpairment(&netlink.Handle{}, port)
	if err != nil {
		t.Fatal(err)
	}
	at.close()
	return at.id
}

// seqFrames sends n frames numbered 0..n-1 from one node to the other
// (raw Ethernet frames of testEtherType) and returns how many copies of each
// arrived. It fails the test if the receiving socket itself dropped any,
// which would count as link loss.
func seqFrames(t *testing.T, from, to *testNode, n int) []int {
	t.Helper()
	rx := rawSocket(t, to, testEtherType)
	defer unix.Close(rx)
	tx, err := socketIn(from.ns, unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)

	run := nonce()[:4]
	counts := make([]int, n)
	done := make(chan struct{})
	var rxErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 2048)
		idle := 0
		for {
			nr, _, err := unix.Recvfrom(rx, buf, 0)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				select {
				case <-done:
					if idle++; idle >= 3 {
						return
					}
				default:
				}
				continue
			}
			if err != nil {
				rxErr = err
				return
			}
			if nr >= 22 && bytes.Equal(buf[14:18], run) {
				if seq := binary.BigEndian.Uint32(buf[18:]); seq < uint32(n) {
					counts[seq]++
				}
			}
		}
	})

	frame := make([]byte, 60)
	copy(frame[0:6], to.mac)
	copy(frame[6:12], from.mac)
	binary.BigEndian.PutUint16(frame[12:], testEtherType)
	copy(frame[14:18], run)
	dst := &unix.SockaddrLinklayer{Protocol: htons(testEtherType), Ifindex: from.ifindex, Halen: 6}
	copy(dst.Addr[:], to.mac)
	for i := range n {
		binary.BigEndian.PutUint32(frame[18:], uint32(i))
		if err := unix.Sendto(tx, frame, 0, dst); err != nil {
			t.Fatalf("sending frame %d: %v", i, err)
		}
		if i%200 == 199 {
			time.Sleep(time.Millisecond) // never fill a receive backlog
		}
	}
	close(done)
	wg.Wait()
	if rxErr != nil {
		t.Fatal(rxErr)
	}
	st, err := unix.GetsockoptTpacketStats(rx, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		t.Fatal(err)
	}
	if st.Drops != 0 {
		t.Fatalf("the receiving socket dropped %d frames: the measurement is void", st.Drops)
	}
	return counts
}

// rawSocket opens an AF_PACKET socket on n's eth1 for ethertype proto, with
// a large buffer and a short receive timeout.
func rawSocket(t *testing.T, n *testNode, proto uint16) int {
	t.Helper()
	fd, err := socketIn(n.ns, unix.AF_PACKET, unix.SOCK_RAW, int(htons(proto)))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: n.ifindex}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	return fd
}

// lossOf returns the share of frames (in percent) that did not arrive, and
// the mean length of the runs of consecutive missing frames.
func lossOf(counts []int) (percent, meanBurst float64) {
	var missing, bursts int
	for i, c := range counts {
		if c == 0 {
			missing++
			if i == 0 || counts[i-1] != 0 {
				bursts++
			}
		}
	}
	if bursts > 0 {
		meanBurst = float64(missing) / float64(bursts)
	}
	return 100 * float64(missing) / float64(len(counts)), meanBurst
}

// extraOf returns the share of frames (in percent) that arrived twice or
// more, counting every extra copy.
func extraOf(counts []int) float64 {
	var extra int
	for _, c := range counts {
		if c > 1 {
			extra += c - 1
		}
	}
	return 100 * float64(extra) / float64(len(counts))
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestImpairLossAndDuplication(t *testing.T) {
	testkit.RequireRoot(t)
	l := impairedLink(t)

	for _, tc := range []struct {
		name               string
		im                 Impairment
		loss, lossTol      float64
		extra, extraTol    float64
		minBurst, maxBurst float64
	}{
		// Uncorrelated 10 %: bursts last 1/(1-0.1) = 1.11 frames.
		{"loss 10%", Impairment{Loss: 10}, 10, 1, 0, 0, 1.0, 1.25},
		// Changed live to 30 %.
		{"loss 30%", Impairment{Loss: 30}, 30, 1, 0, 0, 1.3, 1.55},
		// Correlated 50 %: the same rate, bursts of 1/(0.5*0.9) = 2.22
		// frames. The outcomes are correlated, so the rate wanders more
		// than an independent draw's: 1.5 is about five standard deviations at 50000 frames.
		{"loss 10% corr 50%", Impairment{Loss: 10, LossCorrelation: 50}, 10, 1.5, 0, 0, 1.9, 2.6},
		{"duplicate 5%", Impairment{Duplicate: 5}, 0, 0, 5, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := impairID(t, l.a.port)
			impairA(t, l, tc.im)
			after := impairID(t, l.a.port)
			if before != 0 && after != before {
				t.Errorf("impairment program %d replaced by %d: a live change must be a map update", before, after)
			}
			if got, err := ReadImpairment(l.a.port); err != nil || got != tc.im {
				t.Errorf("ReadImpairment = %+v, %v; want %+v", got, err, tc.im)
			}
			c0, err := ReadImpairCounters(l.a.port)
			if err != nil {
				t.Fatal(err)
			}

			counts := seqFrames(t, l.a, l.b, impairFrames)
			loss, burst := lossOf(counts)
			extra := extraOf(counts)
			t.Logf("%+v: loss %.2f%% (mean burst %.2f frames), duplicates %.2f%%", tc.im, loss, burst, extra)
			if !within(loss, tc.loss, tc.lossTol) {
				t.Errorf("loss %.2f%%, want %v ± %v %%", loss, tc.loss, tc.lossTol)
			}
			if tc.loss > 0 && (burst < tc.minBurst || burst > tc.maxBurst) {
				t.Errorf("mean loss burst %.2f frames, want %v to %v", burst, tc.minBurst, tc.maxBurst)
			}
			if !within(extra, tc.extra, tc.extraTol) {
				t.Errorf("duplicates %.2f%%, want %v ± %v %%", extra, tc.extra, tc.extraTol)
			}

			// The program counted at least what the receiver saw (other
			// frames of A's stack may cross meanwhile).
			c1, err := ReadImpairCounters(l.a.port)
			if err != nil {
				t.Fatal(err)
			}
			missing := int(math.Round(loss / 100 * impairFrames))
			dups := int(math.Round(extra / 100 * impairFrames))
			if d := c1.Frames - c0.Frames; d < uint64(impairFrames+dups) {
				t.Errorf("counted %d frames, want at least %d", d, impairFrames+dups)
			}
			if d := c1.Dropped - c0.Dropped; d < uint64(missing) || d > uint64(missing)+20 {
				t.Errorf("counted %d drops, the receiver missed %d", d, missing)
			}
			if d := c1.Duplicated - c0.Duplicated; d < uint64(dups) || d > uint64(dups)+20 {
				t.Errorf("counted %d duplicates, the receiver got %d", d, dups)
			}
		})
	}

	// Zero removes the program: nothing lost any more, no counters.
	id := impairID(t, l.a.port)
	impairA(t, l, Impairment{LossCorrelation: 20})
	if f := impairID(t, l.a.port); f != 0 {
		t.Fatalf("impairment program %v still there after a zero Impairment", f)
	}
	if alive := progsGone([]ebpf.ProgramID{id}); len(alive) > 0 {
		t.Errorf("impairment program %d outlived its filter", id)
	}
	if _, err := ReadImpairCounters(l.a.port); !errors.Is(err, ErrNoImpairment) {
		t.Errorf("ReadImpairCounters without a program: %v, want ErrNoImpairment", err)
	}
	if got, err := ReadImpairment(l.a.port); err != nil || !got.IsZero() {
		t.Errorf("ReadImpairment without a program = %+v, %v; want zero, nil", got, err)
	}
	if err := SetImpairment(cfg, l.a.port, Impairment{}); err != nil {
		t.Errorf("removing twice: %v", err)
	}
	if loss, _ := lossOf(seqFrames(t, l.a, l.b, 2000)); loss != 0 {
		t.Errorf("loss %.2f%% after the impairment was removed", loss)
	}
}

func TestSetImpairmentErrors(t *testing.T) {
	testkit.RequireRoot(t)
	for _, tc := range []struct {
		name string
		port int
		im   Impairment
	}{
		{"no port", 0, Impairment{Loss: 1}},
		{"missing port", 0x7ffffff0, Impairment{Loss: 1}},
		{"negative", 1, Impairment{Loss: -1}},
		{"above 100", 1, Impairment{Duplicate: 100.5}},
		{"NaN", 1, Impairment{Corrupt: math.NaN()}},
		{"correlation 100", 1, Impairment{Loss: 5, LossCorrelation: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := SetImpairment(cfg, tc.port, tc.im); err == nil {
				t.Errorf("SetImpairment(%d, %+v) succeeded", tc.port, tc.im)
			}
		})
	}
}
