package capture

import (
	"encoding/binary"
	"io"
	"time"
)

// pcapng block types and options (draft-ietf-opsawg-pcapng).
const (
	blockSHB    = 0x0A0D0D0A
	blockIDB    = 0x00000001
	blockEPB    = 0x00000006
	optEnd      = 0
	optIfName   = 2
	optTsresol  = 9
	optEpbFlags = 2
	linkEN10MB  = 1
)

// Direction of a frame on the interface it is recorded on.
const (
	Inbound  = 1 // the interface received it
	Outbound = 2 // the interface sent it
)

// ngWriter writes a pcapng stream: a section header, then interfaces and packets.
type ngWriter struct {
	w   io.Writer
	buf []byte
}

func newNgWriter(w io.Writer) (*ngWriter, error) {
	n := &ngWriter{w: w}
	body := make([]byte, 16)
	binary.LittleEndian.PutUint32(body[0:], 0x1A2B3C4D) // byte-order magic
	binary.LittleEndian.PutUint16(body[4:], 1)          // version 1.0
	binary.LittleEndian.PutUint16(body[6:], 0)
	binary.LittleEndian.PutUint64(body[8:], ^uint64(0)) // section length not known
	return n, n.block(blockSHB, body, nil)
}

// addInterface describes interface number id (in the order added): Ethernet, named name,
// timestamps in nanoseconds.
func (n *ngWriter) addInterface(name string, snaplen int) error {
	body := make([]byte, 8)
	binary.LittleEndian.PutUint16(body[0:], linkEN10MB)
	binary.LittleEndian.PutUint32(body[4:], uint32(snaplen))
	opts := option(nil, optIfName, []byte(name))
	opts = option(opts, optTsresol, []byte{9})
	return n.block(blockIDB, body, opts)
}

// writePacket writes one frame (data, of length orig on the wire) of interface id.
func (n *ngWriter) writePacket(id int, ts time.Time, data []byte, orig int, dir uint32) error {
	body := make([]byte, 20, 20+len(data)+3)
	ns := uint64(ts.UnixNano())
	binary.LittleEndian.PutUint32(body[0:], uint32(id))
	binary.LittleEndian.PutUint32(body[4:], uint32(ns>>32))
	binary.LittleEndian.PutUint32(body[8:], uint32(ns))
	binary.LittleEndian.PutUint32(body[12:], uint32(len(data)))
	binary.LittleEndian.PutUint32(body[16:], uint32(orig))
	body = append(body, data...)
	body = pad(body)
	flags := make([]byte, 4)
	binary.LittleEndian.PutUint32(flags, dir)
	return n.block(blockEPB, body, option(nil, optEpbFlags, flags))
}

// block writes a block: type, total length, body, options (ended by opt_endofopt), length.
func (n *ngWriter) block(typ uint32, body, opts []byte) error {
	if opts != nil {
		opts = append(opts, 0, 0, 0, 0) // opt_endofopt
	}
	total := 12 + len(body) + len(opts)
	b := n.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = binary.LittleEndian.AppendUint32(b, uint32(total))
	b = append(b, body...)
	b = append(b, opts...)
	b = binary.LittleEndian.AppendUint32(b, uint32(total))
	n.buf = b
	_, err := n.w.Write(b)
	return err
}

// option appends an option (code, length, value padded to 32 bits).
func option(b []byte, code uint16, value []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, code)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(value)))
	return pad(append(b, value...))
}

func pad(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
