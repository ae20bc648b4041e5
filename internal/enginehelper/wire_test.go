package enginehelper

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fakeOps records the changes it is given, in order, and fails those it is told to.
type fakeOps struct {
	log   []string
	fail  error
	fails map[int]syscall.Errno
}

func (f *fakeOps) rec(s string) error { f.log = append(f.log, s); return f.fail }
func (f *fakeOps) AddrReplace(l netlink.Link, a *netlink.Addr) error {
	return f.rec(fmt.Sprintf("addr %d %s", l.Attrs().Index, a.IPNet))
}
func (f *fakeOps) AddrDel(l netlink.Link, a *netlink.Addr) error {
	return f.rec(fmt.Sprintf("addrdel %d %s", l.Attrs().Index, a.IPNet))
}
func (f *fakeOps) NeighSet(n *netlink.Neigh) error {
	return f.rec(fmt.Sprintf("neigh %d %s %s", n.LinkIndex, n.IP, n.HardwareAddr))
}
func (f *fakeOps) NeighDel(n *netlink.Neigh) error {
	return f.rec(fmt.Sprintf("neighdel %d %s", n.LinkIndex, n.IP))
}
func (f *fakeOps) send(c []rtChange) (map[int]syscall.Errno, error) {
	f.log = append(f.log, fmt.Sprintf("routes %d", len(c)))
	return f.fails, nil
}
func (f *fakeOps) dump() ([]*rtMsg, error) {
	body := make([]byte, rtmsgLen)
	body[0], body[4] = unix.AF_INET, unix.RT_TABLE_MAIN
	m, err := parseRoute(unix.RTM_NEWROUTE, body)
	return []*rtMsg{m}, err
}

// The node's helper's end (remoteFE) and the holder's (serveHeld) over TCP on loopback: the
// changes arrive in order, errors keep their errno, a connection from another address than
// the node's machine is refused, and a holder that goes away is noticed.
func TestRemoteWire(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ops := &fakeOps{fails: map[int]syscall.Errno{1: unix.EEXIST}}
	go serveHeld(ln, netip.MustParseAddr("127.0.0.1"), wireHello{Engine: 1, Links: map[string]int{"eth1": 7}}, ops)
	f := &fe{index: 1, remote: &remoteFE{addr: ln.Addr().String()}}
	if err := f.dial(); err != nil {
		t.Fatal(err)
	}
	if f.links["eth1"] != 7 || !f.remote.connected() {
		t.Fatalf("links %v, connected %v", f.links, f.remote.connected())
	}
	r := f.remote
	link := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: 7}}
	a, _ := netlink.ParseAddr("10.1.0.1/24")
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"address", func() error { return r.AddrReplace(link, a) }, "addr 7 10.1.0.1/24"},
		{"neighbour", func() error {
			return r.NeighSet(&netlink.Neigh{LinkIndex: 7, IP: net.ParseIP("10.1.0.2"), HardwareAddr: mac})
		},
			"neigh 7 10.1.0.2 02:00:00:00:00:01"},
		{"routes", func() error {
			fails, err := r.send([]rtChange{{typ: unix.RTM_NEWROUTE, body: make([]byte, rtmsgLen)}, {typ: unix.RTM_DELROUTE, body: make([]byte, rtmsgLen)}})
			if err == nil && fails[1] != unix.EEXIST {
				err = fmt.Errorf("fails %v", fails)
			}
			return err
		}, "routes 2"},
		{"address removed", func() error { return r.AddrDel(link, a) }, "addrdel 7 10.1.0.1/24"},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if len(ops.log) != i+1 || ops.log[i] != s.want {
			t.Fatalf("%s: log %q, want %q last", s.name, ops.log, s.want)
		}
	}
	ops.fail = unix.EADDRNOTAVAIL
	if err := r.AddrDel(link, a); !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Fatalf("error %v, want EADDRNOTAVAIL through", err)
	}
	routes, err := r.dump()
	if err != nil || len(routes) != 1 || routes[0].table != unix.RT_TABLE_MAIN {
		t.Fatalf("dump: %v, %v", routes, err)
	}
	ln.Close()
	r.mu.Lock()
	r.conn.Close() // as when the holder is killed
	r.mu.Unlock()
	if err := r.change(wireReq{Op: opPing}); !errors.Is(err, errDown) || r.connected() {
		t.Fatalf("after the holder went: %v, connected %v", err, r.connected())
	}
}

// A connection from another machine than the node's is closed before the hello.
func TestRemoteWireRefusesStrangers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serveHeld(ln, netip.MustParseAddr("198.18.0.1"), wireHello{Engine: 0}, &fakeOps{})
	f := &fe{index: 0, remote: &remoteFE{addr: ln.Addr().String()}}
	if err := f.dial(); err == nil {
		t.Fatal("dialled a holder that should refuse this address")
	}
}
