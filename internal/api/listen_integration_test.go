//go:build integration

package api

import (
	"errors"
	"net"
	"testing"

	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/vishvananda/netlink"
)

// TestListenElsewhere listens on 198.18.0.1, an address other than loopback, inside a network
// namespace of the test's own (nothing is served on the host): refused without TLS, served
// with TLS to clients with a certificate of the client CA only.
func TestListenElsewhere(t *testing.T) {
	ns, err := netnsutil.New()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	c := makeCerts(t)
	var l net.Listener
	err = netnsutil.Do(ns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("198.18.0.1/32")
		if err := netlink.AddrAdd(lo, addr); err != nil {
			return err
		}
		if l, err := Listen("198.18.0.1:0", TLS{}); !errors.Is(err, ErrNeedsTLS) {
			if l != nil {
				l.Close()
			}
			t.Errorf("Listen on 198.18.0.1 without TLS: %v, want ErrNeedsTLS", err)
		}
		l, err = Listen("198.18.0.1:0", TLS{Cert: c.serverCert, Key: c.serverKey, ClientCA: c.ca})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dial := func(addr string) (conn net.Conn, err error) {
		err = netnsutil.Do(ns, func() error {
			conn, err = net.Dial("tcp", addr)
			return err
		})
		return conn, err
	}
	checkTLSServer(t, c, l, dial)
}
