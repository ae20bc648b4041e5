//go:build integration

package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
	"golang.org/x/sys/unix"
)

// The LAN test builds a LAN of four nodes by hand (ns A..D, eth1 10.99.0.1-4/24, each behind a
// port in the root namespace) and checks it as a switch: ARP and ping through flooding,
// unicast to the learnt member only, broadcast to all, a MAC address moving, a member leaving
// and joining, ageing and the table's limit, in both delivery modes.

func setupLAN(t *testing.T, n int) []*testNode {
	t.Helper()
	testkit.RequireRoot(t)
	testkit.LeaveHostAsFound(t)
	pid := os.Getpid()
	var nodes []*testNode
	for i := range n {
		nd := &testNode{
			nsName:   fmt.Sprintf("trellis-dp-lan-%d-%d", pid, i),
			portName: fmt.Sprintf("tdpL%d%d", i, pid),
			addr:     net.IPv4(10, 99, 0, byte(1+i)).To4(),
		}
		createNode(t, nd)
		nodes = append(nodes, nd)
	}
	return nodes
}

func lanMembers(nodes []*testNode, peer bool) []LANMember {
	var out []LANMember
	for _, n := range nodes {
		out = append(out, LANMember{Ifindex: n.port, Peer: peer})
	}
	return out
}

// frameTo sends one frame of testEtherType from from's eth1 with the given source and
// destination addresses, and returns the nodes of others that received it within 300 ms
// (at once, with no others).
func frameTo(t *testing.T, from *testNode, src, dst net.HardwareAddr, others []*testNode) map[*testNode]bool {
	t.Helper()
	tag := nonce()
	var rxs []int
	defer func() {
		for _, fd := range rxs {
			unix.Close(fd)
		}
	}()
	for _, o := range others {
		fd, err := socketIn(o.ns, unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK, int(htons(testEtherType)))
		if err != nil {
			t.Fatal(err)
		}
		rxs = append(rxs, fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(testEtherType), Ifindex: o.ifindex}); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := socketIn(from.ns, unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)
	frame := make([]byte, 60)
	copy(frame[0:6], dst)
	copy(frame[6:12], src)
	binary.BigEndian.PutUint16(frame[12:], testEtherType)
	copy(frame[14:], tag)
	if err := unix.Sendto(tx, frame, 0, &unix.SockaddrLinklayer{Ifindex: from.ifindex, Halen: 6}); err != nil {
		t.Fatal(err)
	}
	got := map[*testNode]bool{}
	if len(others) == 0 {
		return got
	}
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for i, fd := range rxs {
			for {
				n, _, err := unix.Recvfrom(fd, buf, 0)
				if err != nil {
					break
				}
				if n >= 14+len(tag) && bytes.Equal(buf[14:14+len(tag)], tag) && bytes.Equal(buf[6:12], src) {
					got[others[i]] = true
				}
			}
		}
	}
	return got
}

func receivers(got map[*testNode]bool, nodes []*testNode) string {
	var b bytes.Buffer
	for _, n := range nodes {
		if got[n] {
			fmt.Fprintf(&b, "%s ", n.portName)
		}
	}
	return b.String()
}

func wantReceivers(t *testing.T, what string, got map[*testNode]bool, want, all []*testNode) {
	t.Helper()
	if g, w := receivers(got, all), receivers(setOf(want), all); g != w {
		t.Errorf("%s: received by [%s], want [%s]", what, g, w)
	}
}

func setOf(nodes []*testNode) map[*testNode]bool {
	m := map[*testNode]bool{}
	for _, n := range nodes {
		m[n] = true
	}
	return m
}

// lanEntry returns the member the LAN learnt mac on (0: not learnt).
func lanEntry(t *testing.T, port int, mac net.HardwareAddr) int {
	t.Helper()
	entries, _, err := ReadLAN(port)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if bytes.Equal(e.MAC, mac) {
			return e.Ifindex
		}
	}
	return 0
}

func TestLAN(t *testing.T) {
	nodes := setupLAN(t, 4)
	a, b, c, d := nodes[0], nodes[1], nodes[2], nodes[3]
	if _, _, err := ReadLAN(a.port); !errors.Is(err, ErrNoLAN) {
		t.Fatalf("ReadLAN before AttachLAN: %v, want ErrNoLAN", err)
	}
	for _, peer := range []bool{true, false} {
		t.Run(fmt.Sprintf("peer=%v", peer), func(t *testing.T) {
			if err := AttachLAN(lanMembers(nodes, peer), LANOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				flushNeighbours(t, n)
			}
			for _, p := range [][2]*testNode{{a, b}, {a, c}, {b, d}, {d, a}} {
				if err := icmpEcho(p[0], p[1].addr, 2*time.Second); err != nil {
					t.Fatalf("ping %s -> %s: %v", p[0].portName, p[1].portName, err)
				}
				if !hasNeighbour(t, p[0], p[1].addr, p[1].mac) {
					t.Errorf("no ARP entry for %v in %s", p[1].addr, p[0].portName)
				}
			}
			if err := sendRawFrame(c, d); err != nil {
				t.Errorf("non-IP frame c -> d: %v", err)
			}
			for _, n := range nodes {
				if got := lanEntry(t, a.port, n.mac); got != n.port {
					t.Errorf("MAC of %s learnt on %d, want its port %d", n.portName, got, n.port)
				}
			}
			wantReceivers(t, "unicast a -> b", frameTo(t, a, a.mac, b.mac, nodes[1:]), []*testNode{b}, nodes)
			bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			wantReceivers(t, "broadcast from a", frameTo(t, a, a.mac, bcast, nodes[1:]), []*testNode{b, c, d}, nodes)
			mcast := net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x05}
			wantReceivers(t, "multicast from c", frameTo(t, c, c.mac, mcast, []*testNode{a, b, d}), []*testNode{a, b, d}, nodes)
			unknown := net.HardwareAddr{0x02, 0x77, 0, 0, 0, 1}
			wantReceivers(t, "unknown unicast from b", frameTo(t, b, b.mac, unknown, []*testNode{a, c, d}), []*testNode{a, c, d}, nodes)
		})
	}

	t.Run("mac move", func(t *testing.T) {
		if err := AttachLAN(lanMembers(nodes, true), LANOptions{}); err != nil {
			t.Fatal(err)
		}
		// a's address now shows up behind c (a host moved): frames to it follow it.
		frameTo(t, c, a.mac, b.mac, nil)
		if got := lanEntry(t, a.port, a.mac); got != c.port {
			t.Fatalf("after a frame from a's MAC on c, it is learnt on %d, want c's port %d", got, c.port)
		}
		wantReceivers(t, "b -> a's MAC, moved to c", frameTo(t, b, b.mac, a.mac, []*testNode{a, c, d}), []*testNode{c}, nodes)
		frameTo(t, a, a.mac, b.mac, nil)
		wantReceivers(t, "b -> a's MAC, moved back", frameTo(t, b, b.mac, a.mac, []*testNode{a, c, d}), []*testNode{a}, nodes)
	})

	t.Run("member leaves and joins", func(t *testing.T) {
		if err := AttachLAN(lanMembers(nodes[:3], true), LANOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := DetachForwarding(d.port); err != nil {
			t.Fatal(err)
		}
		if got := lanEntry(t, a.port, d.mac); got != 0 {
			t.Errorf("d left, but its MAC is still learnt on %d", got)
		}
		bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		wantReceivers(t, "broadcast from a without d", frameTo(t, a, a.mac, bcast, nodes[1:]), []*testNode{b, c}, nodes)
		if err := icmpEcho(d, a.addr, 500*time.Millisecond); err == nil {
			t.Error("d reached a after leaving the LAN")
		}
		if err := AttachLAN(lanMembers(nodes, true), LANOptions{}); err != nil {
			t.Fatal(err)
		}
		wantReceivers(t, "broadcast from a with d back", frameTo(t, a, a.mac, bcast, nodes[1:]), []*testNode{b, c, d}, nodes)
		if err := icmpEcho(d, a.addr, 2*time.Second); err != nil {
			t.Errorf("d rejoined but cannot reach a: %v", err)
		}
	})

	t.Run("ageing", func(t *testing.T) {
		if err := AttachLAN(lanMembers(nodes, true), LANOptions{Aging: time.Second}); err != nil {
			t.Fatal(err)
		}
		x := net.HardwareAddr{0x02, 0x77, 0, 0, 0, 2}
		frameTo(t, c, x, a.mac, nil)
		wantReceivers(t, "a -> x just learnt on c", frameTo(t, a, a.mac, x, nodes[1:]), []*testNode{c}, nodes)
		time.Sleep(1500 * time.Millisecond)
		wantReceivers(t, "a -> x aged", frameTo(t, a, a.mac, x, nodes[1:]), []*testNode{b, c, d}, nodes)
	})

	t.Run("table limit", func(t *testing.T) {
		const limit = 16
		if err := AttachLAN(lanMembers(nodes, true), LANOptions{MaxEntries: limit}); err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			frameTo(t, d, net.HardwareAddr{0x02, 0x66, 0, 0, byte(i >> 8), byte(i)}, a.mac, nil)
		}
		time.Sleep(200 * time.Millisecond) // the last frames are still on their way
		entries, counters, err := ReadLAN(a.port)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > limit || counters.Learnt < 200 {
			t.Errorf("after 200 addresses: %d entries (limit %d), %d learnt (want >= 200)", len(entries), limit, counters.Learnt)
		}
		// The LAN still works: what is not in the table is flooded, then learnt again.
		if err := icmpEcho(b, c.addr, 2*time.Second); err != nil {
			t.Errorf("ping b -> c after the table overflowed: %v", err)
		}
		if got := lanEntry(t, a.port, c.mac); got != c.port {
			t.Errorf("c's MAC learnt on %d after the ping, want %d", got, c.port)
		}
	})
}

func TestAttachLANErrors(t *testing.T) {
	testkit.RequireRoot(t)
	for _, tc := range []struct {
		name    string
		members []LANMember
		opt     LANOptions
	}{
		{"none", nil, LANOptions{}},
		{"twice", []LANMember{{Ifindex: 1}, {Ifindex: 1}}, LANOptions{}},
		{"zero", []LANMember{{Ifindex: 0}}, LANOptions{}},
		{"tunnel into a node", []LANMember{{Ifindex: 1, Tunnel: true, Peer: true}}, LANOptions{}},
		{"negative size", []LANMember{{Ifindex: 1}}, LANOptions{MaxEntries: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := AttachLAN(tc.members, tc.opt); !errors.Is(err, ErrLANMembers) {
				t.Errorf("AttachLAN = %v, want ErrLANMembers", err)
			}
		})
	}
}
