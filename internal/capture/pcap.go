package capture

import (
	"encoding/binary"
	"io"
	"time"
)

// pcapWriter writes the classic pcap format (nanosecond timestamps, Ethernet), for readers
// that do not read pcapng. It has no interfaces or directions: every frame is one record.
type pcapWriter struct {
	w   io.Writer
	buf []byte
}

// pcapMagicNanos is the magic number of a pcap file whose timestamps are in nanoseconds.
const pcapMagicNanos = 0xA1B23C4D

func newPcapWriter(w io.Writer, snaplen int) (*pcapWriter, error) {
	h := make([]byte, 24)
	binary.LittleEndian.PutUint32(h[0:], pcapMagicNanos)
	binary.LittleEndian.PutUint16(h[4:], 2) // version 2.4
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], uint32(snaplen))
	binary.LittleEndian.PutUint32(h[20:], linkEN10MB)
	_, err := w.Write(h)
	return &pcapWriter{w: w}, err
}

func (p *pcapWriter) writePacket(_ int, ts time.Time, data []byte, orig int, _ uint32) error {
	b := p.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(ts.Unix()))
	b = binary.LittleEndian.AppendUint32(b, uint32(ts.Nanosecond()))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint32(b, uint32(orig))
	b = append(b, data...)
	p.buf = b
	_, err := p.w.Write(b)
	return err
}
