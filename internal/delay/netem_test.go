package delay

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// TestNetemRequest decodes the request SetNetem sends, as the kernel's netem_change reads it:
// the tcmsg, the kind, then tc_netem_qopt followed by the attributes.
func TestNetemRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings
		dist string // the table expected, "" none
	}{
		{"delay", Settings{Delay: 10 * time.Millisecond}, ""},
		{"normal jitter", Settings{Delay: 100 * time.Millisecond, Jitter: 10 * time.Millisecond, Distribution: "normal"}, "normal"},
		{"uniform jitter sends a table", Settings{Delay: time.Millisecond, Jitter: 500 * time.Microsecond}, "uniform"},
		{"a minute", Settings{Delay: time.Minute, Jitter: time.Minute, Distribution: "pareto"}, "pareto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := netemRequest(7, tc.s)
			if req.Type != unix.RTM_NEWQDISC || req.Flags&(unix.NLM_F_CREATE|unix.NLM_F_REPLACE) != unix.NLM_F_CREATE|unix.NLM_F_REPLACE {
				t.Fatalf("type %d flags %#x", req.Type, req.Flags)
			}
			msg := req.Serialize()[unix.NLMSG_HDRLEN:]
			tcm := nl.DeserializeTcMsg(msg)
			if tcm.Ifindex != 7 || tcm.Parent != 0xffffffff || tcm.Handle != 0x10000 {
				t.Fatalf("tcmsg %+v", tcm)
			}
			attrs, err := nl.ParseRouteAttr(msg[nl.SizeofTcMsg:])
			if err != nil || len(attrs) != 2 || attrs[0].Attr.Type != nl.TCA_KIND || string(attrs[0].Value) != "netem\x00" || attrs[1].Attr.Type != nl.TCA_OPTIONS {
				t.Fatalf("attributes %v (%v)", attrs, err)
			}
			opt := attrs[1].Value
			q := nl.DeserializeTcNetemQopt(opt)
			if q.Limit != Limit || q.Latency != ticks(tc.s.Delay) || q.Jitter != ticks(tc.s.Jitter) || q.Loss != 0 || q.Duplicate != 0 {
				t.Errorf("qopt %+v", q)
			}
			if uint64(tc.s.Delay)/64 < 1<<32 && q.Latency != uint32(tc.s.Delay/64) {
				t.Errorf("latency %d ticks for %v", q.Latency, tc.s.Delay)
			}
			nested, err := nl.ParseRouteAttr(opt[nl.SizeofTcNetemQopt:])
			if err != nil {
				t.Fatal(err)
			}
			got := map[uint16][]byte{}
			for _, a := range nested {
				got[a.Attr.Type] = a.Value
			}
			if v := int64(binary.NativeEndian.Uint64(got[tcaNetemLatency64])); v != tc.s.Delay.Nanoseconds() {
				t.Errorf("latency64 %d", v)
			}
			if v := int64(binary.NativeEndian.Uint64(got[tcaNetemJitter64])); v != tc.s.Jitter.Nanoseconds() {
				t.Errorf("jitter64 %d", v)
			}
			dist, ok := got[nl.TCA_NETEM_DELAY_DIST]
			if ok != (tc.dist != "") {
				t.Fatalf("table sent: %v, want %v", ok, tc.dist != "")
			}
			if ok {
				want := Table(tc.dist)
				if len(dist) != 2*len(want) {
					t.Fatalf("table of %d bytes", len(dist))
				}
				for i, w := range want {
					if v := int16(binary.NativeEndian.Uint16(dist[2*i:])); v != w {
						t.Fatalf("entry %d: %d, want %d", i, v, w)
					}
				}
			}
		})
	}
}
