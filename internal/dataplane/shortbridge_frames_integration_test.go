//go:build integration

package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	jumboMTU  = 9000
	jumboICMP = 8900 // ICMP bytes of the jumbo echo: one IP packet of 8920 bytes
	testVLAN  = 5
)

// TestShortbridgeVLANAndJumbo checks on each hook, in both delivery modes, that 802.1Q-tagged
// and QinQ frames arrive unchanged with their tags, and that jumbo frames (an 8920-byte IP
// packet that must not be fragmented, on 9000-byte MTUs) cross the shortbridge both ways.
func TestShortbridgeVLANAndJumbo(t *testing.T) {
	testkit.RequireRoot(t)
	for _, hook := range testHooks(t) {
		t.Run(string(hook), func(t *testing.T) {
			useHook(t, hook)
			l := setupTestLink(t)
			for _, n := range []*testNode{l.a, l.b} {
				setMTUs(t, n, jumboMTU)
			}
			for _, peer := range []bool{true, false} {
				attachConcurrently(t, l, peer)
				for _, n := range []*testNode{l.a, l.b} {
					l.progIDs = append(l.progIDs, shortbridgeProgIDs(t, n.port, hook)...)
				}
				for _, c := range []struct {
					name     string
					from, to *testNode
				}{{"A->B", l.a, l.b}, {"B->A", l.b, l.a}} {
					from := &egreNode{ns: c.from.ns, ifindex: c.from.ifindex, mac: c.from.mac}
					to := &egreNode{ns: c.to.ns, ifindex: c.to.ifindex, mac: c.to.mac}
					for _, tags := range [][]vlanTag{
						{{unix.ETH_P_8021Q, testVLAN}},
						{{unix.ETH_P_8021AD, 100}, {unix.ETH_P_8021Q, testVLAN}},
					} {
						if err := egreRawFrameType(from, to, tags, unix.ETH_P_IP, 4); err != nil {
							t.Errorf("peer=%v: %s with VLAN tags %x: %v", peer, c.name, tags, err)
						}
					}
					if err := icmpEchoSized(c.from, c.to.addr, jumboICMP, 2*time.Second); err != nil {
						t.Errorf("peer=%v: jumbo ping %s: %v", peer, c.name, err)
					}
				}
			}
		})
	}
}

// setMTUs sets the MTU of the node's interface and of its port.
func setMTUs(t *testing.T, n *testNode, mtu int) {
	t.Helper()
	port, err := netlink.LinkByIndex(n.port)
	if err == nil {
		err = netlink.LinkSetMTU(port, mtu)
	}
	if err != nil {
		t.Fatalf("MTU of port %s: %v", n.portName, err)
	}
	eth, err := n.nl.LinkByIndex(n.ifindex)
	if err == nil {
		err = n.nl.LinkSetMTU(eth, mtu)
	}
	if err != nil {
		t.Fatalf("MTU of %s in %s: %v", nodeIfName, n.nsName, err)
	}
}

// icmpEchoSized sends one ICMP echo request of icmpBytes bytes (at least the nonce's 8 + 16)
// from inside from's namespace to dst, with fragmentation forbidden (IP_PMTUDISC_DO: a packet
// over the route's MTU fails to send rather than leave in pieces), and waits for the reply.
func icmpEchoSized(from *testNode, dst net.IP, icmpBytes int, timeout time.Duration) error {
	fd, err := socketIn(from.ns, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	if err != nil {
		return fmt.Errorf("icmp socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO); err != nil {
		return err
	}
	nc := nonce()
	req := make([]byte, max(8+len(nc), icmpBytes))
	id := binary.BigEndian.Uint16(nc)
	req[0] = 8 // echo request
	binary.BigEndian.PutUint16(req[4:], id)
	binary.BigEndian.PutUint16(req[6:], 1)
	copy(req[8:], nc)
	binary.BigEndian.PutUint16(req[2:], inetChecksum(req))
	to := &unix.SockaddrInet4{}
	copy(to.Addr[:], dst.To4())
	if err := unix.Sendto(fd, req, 0, to); err != nil {
		return fmt.Errorf("sending a %d-byte echo request: %w", len(req), err)
	}
	buf := make([]byte, 65536)
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("no %d-byte echo reply from %v within %v", len(req), dst, timeout)
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("receiving: %w", err)
		}
		pkt := buf[:n]
		if len(pkt) < 20 {
			continue
		}
		ihl := int(pkt[0]&0x0f) * 4
		if len(pkt) < ihl+8 || !net.IP(pkt[12:16]).Equal(dst) {
			continue
		}
		icmp := pkt[ihl:]
		if icmp[0] == 0 && binary.BigEndian.Uint16(icmp[4:]) == id && len(icmp) == len(req) &&
			bytes.Equal(icmp[8:8+len(nc)], nc) {
			return nil
		}
	}
}
