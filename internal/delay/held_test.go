package delay

import (
	"math/rand/v2"
	"testing"
)

// TestHeld: frames come out in the order of their times, those due at the same time in the
// order they came in, and buffers are reused by size.
func TestHeld(t *testing.T) {
	var h held
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 5000 {
		h.push(frame{due: int64(r.IntN(100)), seq: uint64(i)})
	}
	prev := frame{due: -1}
	for n := 0; h.len() > 0; n++ {
		f := h.pop()
		if f.before(prev) || (f.due == prev.due && f.seq < prev.seq) {
			t.Fatalf("frame %d: due %d seq %d after due %d seq %d", n, f.due, f.seq, prev.due, prev.seq)
		}
		prev = f
	}
	small, large := h.buffer(60), h.buffer(9000)
	if len(small) != 60 || cap(small) != smallBuf || len(large) != 9000 || cap(large) != maxFrame {
		t.Fatalf("buffers %d/%d and %d/%d", len(small), cap(small), len(large), cap(large))
	}
	h.release(small)
	h.release(large)
	if b := h.buffer(1500); &b[0] != &small[0] {
		t.Error("a small buffer released was not reused")
	}
	if b := h.buffer(smallBuf + 1); &b[0] != &large[0] {
		t.Error("a large buffer released was not reused")
	}
	if allocs := testing.AllocsPerRun(100, func() {
		b := h.buffer(100)
		h.push(frame{due: 1, data: b})
		h.release(h.pop().data)
	}); allocs != 0 {
		t.Errorf("%v allocations per frame held", allocs)
	}
}
