package enginehelper

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

func TestFromRoot(t *testing.T) {
	home := netip.MustParseAddr("198.18.0.1")
	for _, c := range []struct {
		from string
		want bool
	}{
		{"198.18.0.1:600", true},
		{"198.18.0.1:1023", true},
		{"[::ffff:198.18.0.1]:700", true}, // an IPv4 peer as a dual-stack socket shows it
		{"198.18.0.1:1024", false},        // any local user of home may bind it
		{"198.18.0.1:40000", false},
		{"198.18.0.2:600", false}, // another machine's root
	} {
		if got := fromRoot(netip.MustParseAddrPort(c.from), home); got != c.want {
			t.Errorf("fromRoot(%s, %s) = %v, want %v", c.from, home, got, c.want)
		}
	}
}

func TestDialPrivileged(t *testing.T) {
	testkit.RequireRoot(t) // binding a port below 1024 needs CAP_NET_BIND_SERVICE
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for range 3 { // ports drawn again each time; one in TIME_WAIT is skipped
		conn, err := dialPrivileged(ln.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		peer, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		from := netip.MustParseAddrPort(peer.RemoteAddr().String())
		if p := from.Port(); p < mirrorPortLow || p >= privilegedPorts {
			t.Errorf("the mirror's connection came from port %d, want %d-%d", p, mirrorPortLow, privilegedPorts-1)
		}
		conn.Close()
		peer.Close()
	}
}
