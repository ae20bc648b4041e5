package delay

// frame is a frame held, with when it is due and its arrival number (which orders frames due
// at the same time: they leave in the order they came).
type frame struct {
	due  int64 // CLOCK_MONOTONIC, ns
	seq  uint64
	data []byte
}

func (a frame) before(b frame) bool { return a.due < b.due || (a.due == b.due && a.seq < b.seq) }

// smallBuf is the size of the buffers of frames up to a full Ethernet frame (with its offload
// header); larger frames (TCP segments of up to 64 KiB) get buffers of maxFrame.
const smallBuf = 2048

// held is what a delay line holds: its frames in a binary heap ordered by due time, and the
// buffers they are copied into, which are reused, so that once the line has run a while it
// allocates nothing per frame. (The line runs with Go's garbage collector off: a collection
// stops every thread, the line's too, until threads of the Go runtime that a busy machine runs
// late have done their part.)
type held struct {
	f    []frame
	free [2][][]byte // free buffers, small and large
}

func (h *held) len() int { return len(h.f) }

// first is the frame due first; the heap must not be empty.
func (h *held) first() frame { return h.f[0] }

// buffer returns a buffer of n bytes (n <= maxFrame), reused if one is free.
func (h *held) buffer(n int) []byte {
	class, size := 0, smallBuf
	if n > smallBuf {
		class, size = 1, maxFrame
	}
	if k := len(h.free[class]); k > 0 {
		b := h.free[class][k-1]
		h.free[class] = h.free[class][:k-1]
		return b[:n]
	}
	return make([]byte, n, size)
}

// release gives a frame's buffer back once the frame is sent.
func (h *held) release(b []byte) {
	class := 0
	if cap(b) > smallBuf {
		class = 1
	}
	h.free[class] = append(h.free[class], b)
}

// push adds a frame.
func (h *held) push(x frame) {
	h.f = append(h.f, x)
	i := len(h.f) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.f[i].before(h.f[p]) {
			break
		}
		h.f[i], h.f[p] = h.f[p], h.f[i]
		i = p
	}
}

// pop removes and returns the frame due first; the heap must not be empty.
func (h *held) pop() frame {
	top := h.f[0]
	last := len(h.f) - 1
	h.f[0] = h.f[last]
	h.f[last] = frame{}
	h.f = h.f[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.f) && h.f[l].before(h.f[m]) {
			m = l
		}
		if r < len(h.f) && h.f[r].before(h.f[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.f[i], h.f[m] = h.f[m], h.f[i]
		i = m
	}
	return top
}
