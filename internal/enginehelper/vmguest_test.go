package enginehelper

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A route change crosses a VM's mirror port as JSON and comes back the same; the guest keeps
// only the routes the mirror copies.
func TestGuestWireRoutes(t *testing.T) {
	main, boot, kernel, uni := uint8(unix.RT_TABLE_MAIN), uint8(unix.RTPROT_BOOT), uint8(unix.RTPROT_KERNEL), uint8(unix.RTN_UNICAST)
	static := route(unix.AF_INET, 24, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(4)})
	connected := route(unix.AF_INET, 24, main, kernel, uni, 0, dst, attr{unix.RTA_OIF, u32(4)})
	local := route(unix.AF_INET, 32, unix.RT_TABLE_LOCAL, kernel, unix.RTN_LOCAL, 0, dst)
	var in []*rtMsg
	for _, b := range [][]byte{static, connected, local} {
		m, err := parseRoute(unix.RTM_NEWROUTE, b)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, m)
	}
	kept := copiedOnly(in)
	if len(kept) != 1 || !bytes.Equal(kept[0].body, static) {
		t.Fatalf("copiedOnly kept %d routes; want the static one only", len(kept))
	}
	rep := wireReply{ID: 9, Routes: []wireChange{{Typ: unix.RTM_DELROUTE, Body: static}}, Links: map[string]int{"eth1": 4}, Full: true, Held: 1200}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back wireReply
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	out, err := parseChanges(back.Routes)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != 9 || !back.Full || back.Held != 1200 || back.Links["eth1"] != 4 || len(out) != 1 ||
		out[0].typ != unix.RTM_DELROUTE || !bytes.Equal(out[0].body, static) || out[0].dstLen != 24 {
		t.Errorf("after JSON: %+v, routes %+v", back, out)
	}
	if _, err := parseChanges([]wireChange{{Typ: unix.RTM_NEWROUTE, Body: []byte{1, 2}}}); err == nil {
		t.Errorf("parseChanges took a 2-byte route")
	}
}

// The host's end of a mirror port skips what an earlier host left unread (a reply to another
// request, the rest of a line) and takes the reply with its request's ID.
func TestJSONCodecSkipsEarlierReplies(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	defer guest.Close()
	go func() {
		rd := bufio.NewReader(guest)
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return
		}
		var req wireReq
		if json.Unmarshal(line, &req) != nil {
			return
		}
		stale, _ := json.Marshal(wireReply{ID: req.ID - 1, Err: "for an earlier host"})
		mine, _ := json.Marshal(wireReply{ID: req.ID, Links: map[string]int{"eth2": 3}})
		guest.Write(append(append(append([]byte(`,"Err":"half`+"\n"), stale...), '\n'), append(mine, '\n')...))
	}()
	c := newJSONCodec(host)
	host.SetDeadline(time.Now().Add(5 * time.Second))
	rep, err := c.roundTrip(wireReq{Op: opLinks})
	if err != nil || rep.err() != nil || rep.Links["eth2"] != 3 {
		t.Fatalf("roundTrip: %+v, %v", rep, err)
	}
}

// The control VM's agent's replies name its interfaces, which the helper learns; the delay of
// a change counts from when the guest saw it.
func TestGuestSourceLinksAndDelay(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	defer guest.Close()
	go func() {
		rd := bufio.NewReader(guest)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				return
			}
			var req wireReq
			json.Unmarshal(line, &req)
			data, _ := json.Marshal(wireReply{ID: req.ID, Links: map[string]int{"eth1": 2, "lo": 1}})
			guest.Write(append(data, '\n'))
		}
	}()
	g := &guestSource{}
	if _, err := g.call(newJSONCodec(host), wireReq{Op: opWatch}); err != nil {
		t.Fatal(err)
	}
	if g.name(2) != "eth1" || g.name(7) != "" {
		t.Errorf("names: 2 is %q, 7 is %q; want eth1 and none", g.name(2), g.name(7))
	}
	now := time.Now()
	if got := g.oldest(now); !got.Equal(now) {
		t.Errorf("oldest with nothing pending = %v, want now", got)
	}
	want := now.Add(-30 * time.Millisecond)
	g.since = want
	if got := g.oldest(now); !got.Equal(want) {
		t.Errorf("oldest = %v before now, want 30ms", now.Sub(got))
	}
	if !g.since.IsZero() {
		t.Errorf("oldest did not forget the pending change")
	}
	g.since = now.Add(time.Second) // the guest's clock said more than the host saw
	if got := g.oldest(now); !got.Equal(now) {
		t.Errorf("oldest of a change seen later than now = %v, want now", got)
	}
}
