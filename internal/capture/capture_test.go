package capture

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

func TestParseDDD(t *testing.T) {
	cases := []struct {
		name, text string
		want       int
		err        string
	}{
		{"icmp", "4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n", 4, ""},
		{"count wrong", "3\n40 0 0 12\n", 0, "want a count"},
		{"not a number", "1\n40 0 x 12\n", 0, "invalid syntax"},
		{"empty", "", 0, "want a count"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseDDD(c.text)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || len(got) != c.want || got[1].Op != 21 || got[1].Jf != 1 || got[1].K != 2048 {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

// TestPcapng checks the blocks' layout: lengths repeated, 32-bit alignment, the packet's
// interface, timestamp, lengths, data and direction flag.
func TestPcapng(t *testing.T) {
	var b bytes.Buffer
	w, err := newNgWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.addInterface("r1:eth1", Snaplen); err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 123456789)
	if err := w.writePacket(0, ts, []byte{1, 2, 3, 4, 5}, 60, Inbound); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	var types []uint32
	for off := 0; off < len(data); {
		typ, n := binary.LittleEndian.Uint32(data[off:]), int(binary.LittleEndian.Uint32(data[off+4:]))
		if n%4 != 0 || off+n > len(data) || binary.LittleEndian.Uint32(data[off+n-4:]) != uint32(n) {
			t.Fatalf("block at %d: type %x length %d is malformed", off, typ, n)
		}
		types = append(types, typ)
		body := data[off+8 : off+n-4]
		switch typ {
		case blockIDB:
			if !bytes.Contains(body, []byte("r1:eth1")) {
				t.Errorf("interface block has no name")
			}
		case blockEPB:
			ns := uint64(binary.LittleEndian.Uint32(body[4:]))<<32 | uint64(binary.LittleEndian.Uint32(body[8:]))
			if ns != uint64(ts.UnixNano()) || binary.LittleEndian.Uint32(body[12:]) != 5 || binary.LittleEndian.Uint32(body[16:]) != 60 ||
				!bytes.Equal(body[20:25], []byte{1, 2, 3, 4, 5}) {
				t.Errorf("packet block: %x", body)
			}
			if code, flags := binary.LittleEndian.Uint16(body[28:]), binary.LittleEndian.Uint32(body[32:]); code != optEpbFlags || flags != Inbound {
				t.Errorf("packet flags option %d = %d, want %d = %d", code, flags, optEpbFlags, Inbound)
			}
		}
		off += n
	}
	if len(types) != 3 || types[0] != blockSHB || types[1] != blockIDB || types[2] != blockEPB {
		t.Errorf("blocks %x, want SHB, IDB, EPB", types)
	}
}

func TestPcap(t *testing.T) {
	var b bytes.Buffer
	w, err := newPcapWriter(&b, Snaplen)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 123456789)
	if err := w.writePacket(1, ts, []byte{1, 2, 3}, 60, Outbound); err != nil {
		t.Fatal(err)
	}
	d := b.Bytes()
	le := binary.LittleEndian
	checks := []struct {
		what      string
		got, want uint32
	}{
		{"magic", le.Uint32(d[0:]), pcapMagicNanos},
		{"major version", uint32(le.Uint16(d[4:])), 2},
		{"minor version", uint32(le.Uint16(d[6:])), 4},
		{"snaplen", le.Uint32(d[16:]), Snaplen},
		{"link type", le.Uint32(d[20:]), linkEN10MB},
		{"seconds", le.Uint32(d[24:]), 1700000000},
		{"nanoseconds", le.Uint32(d[28:]), 123456789},
		{"captured length", le.Uint32(d[32:]), 3},
		{"length on the wire", le.Uint32(d[36:]), 60},
		{"file length", uint32(len(d)), 24 + 16 + 3},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
	if !bytes.Equal(d[40:], []byte{1, 2, 3}) {
		t.Errorf("frame %x", d[40:])
	}
}
