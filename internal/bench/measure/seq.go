package measure

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Numbered frames, to see what a link does to each frame: which are lost (and in what runs),
// which arrive twice and which arrive with bits changed. Each frame is a UDP frame (UDPFrames)
// whose payload carries a run marker and the frame's number three times, so that a frame with
// one bit flipped anywhere is still known by its number (two of the three copies agree) and is
// told from an intact one by comparing it with the frame as it was sent.

// seqLen is what the numbering takes of a frame's payload: the run marker and three copies of
// the number.
const seqLen = 4 + 3*4

// maxFlips is the most bits a copy of a numbered frame may differ by and still count as that
// frame, corrupted: the corruption under test flips one bit; a frame further away is foreign.
const maxFlips = 8

// ErrSeqFrame: a frame too short to carry a number.
var ErrSeqFrame = errors.New("frame too short to number")

// SeqFrames makes n copies of base, numbered 0 to n-1 and marked with run, for Tally.Add.
func SeqFrames(base []byte, run uint32, n int) ([][]byte, error) {
	if len(base) < HeaderLen+seqLen {
		return nil, fmt.Errorf("%w: %d bytes, need %d", ErrSeqFrame, len(base), HeaderLen+seqLen)
	}
	out := make([][]byte, n)
	for i := range out {
		f := append([]byte(nil), base...)
		p := f[HeaderLen:]
		binary.BigEndian.PutUint32(p, run)
		for c := 0; c < 3; c++ {
			binary.BigEndian.PutUint32(p[4+4*c:], uint32(i))
		}
		out[i] = f
	}
	return out, nil
}

// Tally is what arrived of a set of numbered frames.
type Tally struct {
	Copies    []int // per frame number: copies that arrived, corrupted ones included
	Corrupted int   // copies that arrived with bits changed
	Foreign   int   // frames of the same size that are no copy of a numbered frame
	// Reordered counts the frames that arrived after a frame numbered higher (RFC 4737: a
	// number below the next expected one).
	Reordered int
	sent      [][]byte
	nextExp   int
	routed    bool // compare payloads only (ProbeRouted)
}

// NewTally counts copies of frames (made by SeqFrames).
func NewTally(frames [][]byte) *Tally {
	return &Tally{Copies: make([]int, len(frames)), sent: frames}
}

// Add counts a frame that arrived, and returns the number of the frame it is a copy of, -1 if
// it is none. Frames of another size are no business of the tally's and are ignored.
func (t *Tally) Add(got []byte) int {
	if len(t.sent) == 0 || len(got) != len(t.sent[0]) {
		return -1
	}
	p := got[HeaderLen:]
	a, b, c := binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:]), binary.BigEndian.Uint32(p[12:])
	seq := a
	if a != b && a != c {
		seq = b // b == c, or no two copies agree and the number is out of range below
		if b != c {
			t.Foreign++
			return -1
		}
	}
	if seq >= uint32(len(t.sent)) {
		t.Foreign++
		return -1
	}
	d := hamming(got, t.sent[seq])
	if t.routed {
		d = hamming(got[HeaderLen:], t.sent[seq][HeaderLen:])
	}
	if d > maxFlips {
		t.Foreign++
		return -1
	}
	t.Copies[seq]++
	if int(seq) < t.nextExp {
		t.Reordered++
	} else {
		t.nextExp = int(seq) + 1
	}
	if d > 0 {
		t.Corrupted++
	}
	return int(seq)
}

func hamming(a, b []byte) int {
	d := 0
	for i := range a {
		d += bits.OnesCount8(a[i] ^ b[i])
	}
	return d
}

// Arrived is the number of copies that arrived.
func (t *Tally) Arrived() int {
	n := 0
	for _, c := range t.Copies {
		n += c
	}
	return n
}

// Loss is the share of frames (percent) of which no copy arrived, and the mean length of the
// runs of consecutive lost frames (0 if none was lost).
func (t *Tally) Loss() (percent, meanBurst float64) {
	if len(t.Copies) == 0 {
		return 0, 0
	}
	var lost, runs int
	for i, c := range t.Copies {
		if c == 0 {
			lost++
			if i == 0 || t.Copies[i-1] != 0 {
				runs++
			}
		}
	}
	if runs > 0 {
		meanBurst = float64(lost) / float64(runs)
	}
	return 100 * float64(lost) / float64(len(t.Copies)), meanBurst
}

// Duplicates is the number of extra copies that arrived, in percent of the frames sent.
func (t *Tally) Duplicates() float64 {
	if len(t.Copies) == 0 {
		return 0
	}
	extra := 0
	for _, c := range t.Copies {
		extra += max(c-1, 0)
	}
	return 100 * float64(extra) / float64(len(t.Copies))
}

// CorruptPercent is the share of the copies that arrived with bits changed (percent).
func (t *Tally) CorruptPercent() float64 {
	n := t.Arrived()
	if n == 0 {
		return 0
	}
	return 100 * float64(t.Corrupted) / float64(n)
}
