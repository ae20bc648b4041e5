package measure

import (
	"errors"
	"math"
	"net"
	"testing"
)

func seqTestFrames(t *testing.T, n int) [][]byte {
	t.Helper()
	a := FlowAddrs{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcIP: net.IPv4(10, 9, 0, 1), DstIP: net.IPv4(10, 9, 0, 2), SrcPort: 10000, DstPort: 9}
	base, err := UDPFrames(a, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	frames, err := SeqFrames(base[0], 0xdecafbad, n)
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// A copy with any one bit flipped, wherever it is (the numbers included), counts as a
// corrupted copy of the right frame; an intact copy as an intact one.
func TestTallyEveryBitFlip(t *testing.T) {
	frames := seqTestFrames(t, 300)
	for _, seq := range []int{0, 1, 255, 256, 299} {
		tl := NewTally(frames)
		if got := tl.Add(append([]byte(nil), frames[seq]...)); got != seq || tl.Corrupted != 0 {
			t.Fatalf("intact frame %d: counted as %d, %d corrupted", seq, got, tl.Corrupted)
		}
		for bit := 0; bit < 8*len(frames[seq]); bit++ {
			f := append([]byte(nil), frames[seq]...)
			f[bit/8] ^= 1 << (bit % 8)
			if got := tl.Add(f); got != seq {
				t.Fatalf("frame %d with bit %d flipped: counted as %d", seq, bit, got)
			}
		}
		if want := 1 + 8*len(frames[seq]); tl.Copies[seq] != want || tl.Corrupted != want-1 || tl.Foreign != 0 || tl.Arrived() != want {
			t.Errorf("frame %d: %d copies, %d corrupted, %d foreign; want %d copies, %d corrupted", seq, tl.Copies[seq], tl.Corrupted, tl.Foreign, want, want-1)
		}
	}
}

func TestTallyForeign(t *testing.T) {
	frames := seqTestFrames(t, 10)
	other := seqTestFrames(t, 20)
	for _, c := range []struct {
		name        string
		frame       []byte
		wantForeign int
	}{
		{"another size", make([]byte, 100), 0},
		{"number out of range", other[15], 1},
		{"zeros", make([]byte, 64), 1},
		{"three numbers differ", func() []byte {
			f := append([]byte(nil), frames[1]...)
			f[HeaderLen+7] ^= 1  // first copy's lowest byte: 1 -> 0
			f[HeaderLen+11] ^= 2 // second copy: 1 -> 3
			return f
		}(), 1},
		{"far from the frame sent", func() []byte {
			f := append([]byte(nil), frames[2]...)
			for i := HeaderLen + seqLen; i < len(f); i++ {
				f[i] ^= 0xff
			}
			return f
		}(), 1},
	} {
		tl := NewTally(frames)
		if got := tl.Add(c.frame); got != -1 || tl.Foreign != c.wantForeign || tl.Arrived() != 0 {
			t.Errorf("%s: counted as %d, %d foreign, %d arrived", c.name, got, tl.Foreign, tl.Arrived())
		}
	}
	if _, err := SeqFrames(make([]byte, HeaderLen+seqLen-1), 1, 1); !errors.Is(err, ErrSeqFrame) {
		t.Errorf("a frame too short to number: %v", err)
	}
}

func TestTallyFigures(t *testing.T) {
	for _, c := range []struct {
		name                  string
		copies                []int
		corrupted             int
		loss, burst, dup, cor float64
	}{
		{"all once", []int{1, 1, 1, 1}, 0, 0, 0, 0, 0},
		{"one lost", []int{1, 0, 1, 1}, 0, 25, 1, 0, 0},
		{"two runs", []int{0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, 0, 50, 2.5, 0, 0},
		{"lost at the end", []int{1, 1, 0, 0}, 0, 50, 2, 0, 0},
		{"all lost", []int{0, 0, 0, 0}, 0, 100, 4, 0, 0},
		{"duplicates", []int{2, 1, 3, 1}, 0, 0, 0, 75, 0},
		{"lost and duplicated", []int{2, 0, 1, 1}, 0, 25, 1, 25, 0},
		{"corrupted", []int{1, 1, 1, 1}, 1, 0, 0, 0, 25},
		{"nothing sent", nil, 0, 0, 0, 0, 0},
	} {
		tl := &Tally{Copies: c.copies, Corrupted: c.corrupted}
		loss, burst := tl.Loss()
		got := []float64{loss, burst, tl.Duplicates(), tl.CorruptPercent()}
		want := []float64{c.loss, c.burst, c.dup, c.cor}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-9 {
				t.Errorf("%s: loss, burst, duplicates, corrupted = %v, want %v", c.name, got, want)
				break
			}
		}
	}
}

// Reordered counts, as RFC 4737 does, the frames that arrive with a number below the next
// expected one (the highest seen so far plus one).
func TestTallyReordered(t *testing.T) {
	frames := seqTestFrames(t, 8)
	for _, c := range []struct {
		order []int
		want  int
	}{
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, 0},
		{[]int{0, 2, 1, 3, 4, 5, 6, 7}, 1},
		{[]int{7, 0, 1, 2, 3, 4, 5, 6}, 7},
		{[]int{1, 0, 3, 2, 5, 4, 7, 6}, 4},
		{[]int{0, 1, 1, 2}, 1}, // a duplicate comes after its original
	} {
		tl := NewTally(frames)
		for _, i := range c.order {
			tl.Add(frames[i])
		}
		if tl.Reordered != c.want {
			t.Errorf("arrivals %v: %d reordered, want %d", c.order, tl.Reordered, c.want)
		}
	}
}
