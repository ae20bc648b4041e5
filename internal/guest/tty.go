package guest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// TTYPortName is the virtio-serial port of interactive sessions (trellis exec with a terminal).
const TTYPortName = "trellis.tty"

// Frames of the terminal port, both ways: a type byte, a big-endian 32-bit length, the payload.
const (
	FrameStart  = 'S' // host: start a session; payload: a Session in JSON
	FrameData   = 'D' // host: the terminal's input; guest: the session's output
	FrameResize = 'R' // host: the terminal's new size; payload: a Size in JSON
	FrameExit   = 'X' // guest: the session ended; payload: its exit code, big-endian 32 bits
)

// Session is what an interactive session runs, on a terminal of Size.
type Session struct {
	Argv []string `json:"argv"`
	Size
}

// Size is a terminal's size.
type Size struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

const maxFrame = 1 << 20

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	hdr := make([]byte, 5, 5+len(payload))
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	_, err := w.Write(append(hdr, payload...))
	return err
}

// WriteJSONFrame writes one frame whose payload is v in JSON.
func WriteJSONFrame(w io.Writer, typ byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteFrame(w, typ, data)
}

// ReadFrame reads one frame.
func ReadFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("%w: a frame of %d bytes", ErrAgent, n)
	}
	payload := make([]byte, n)
	_, err := io.ReadFull(r, payload)
	return hdr[0], payload, err
}
