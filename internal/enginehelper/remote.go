package enginehelper

import (
	"encoding/gob"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netlink"
)

// errDown: the remote FE is not connected.
var errDown = errors.New("remote engine not connected")

// remoteFE is the node's helper's end of an FE held on another machine: a VXLAN device per
// interface (the FE's substrate ends here) and the mirror's connection to the holder. An
// engine VM's FE is one too, whose connection is to its guest's agent (vmguest.go).
type remoteFE struct {
	addr  string          // the holder's listener, host:port
	guest string          // or: the unix socket of an engine VM's mirror port (MirrorSocket)
	names map[string]bool // for guest: the node's link interfaces, the copies the mirror uses

	mu    sync.Mutex
	conn  net.Conn
	codec wireCodec

	up     atomic.Bool // connected
	synced atomic.Bool // connected and copied: the classifier may send it frames
}

func (r *remoteFE) connected() bool { return r.up.Load() }

// makeRemoteFE makes the substrate ends of engine i, held on machine c.Engines[i].Host: one
// VXLAN device per interface, towards that machine. It connects later (dial).
func makeRemoteFE(c Config, i int) (*fe, error) {
	peer, ok := c.Peers[c.Engines[i].Host]
	if !ok {
		return nil, fmt.Errorf("%w: FE %d: no address for machine %q", ErrConfig, i, c.Engines[i].Host)
	}
	f := &fe{index: i, ns: -1, links: map[string]int{}, ports: map[string]int{},
		remote: &remoteFE{addr: net.JoinHostPort(peer, strconv.Itoa(plan.EngineMirrorPort(c.Network, c.Node, i)))}}
	f.ops = f.remote
	for _, in := range c.Ifaces {
		name := in.FEPorts[i]
		if err := netdev.Delete(name); err != nil {
			return nil, err
		}
		vx := vxlanTo(name, plan.EngineVNI(c.Network, c.Node, i, in.Name), c.Local, peer, in.MTU)
		if err := netlink.LinkAdd(vx); err != nil {
			return nil, fmt.Errorf("FE %d: %s for %s: %w", i, name, in.Name, err)
		}
		dev, err := netdev.UpQuiet(name)
		if err != nil {
			return nil, err
		}
		f.ports[in.Name] = dev.Attrs().Index
	}
	f.startWork()
	return f, nil
}

// vxlanTo is a VXLAN device named name, from underlay address local to remote.
// mtu 0 is Ethernet's 1500, as the node's interface has (VXLAN's own default is 1450).
func vxlanTo(name string, vni uint32, local, remote string, mtu int) *netlink.Vxlan {
	if mtu == 0 {
		mtu = 1500
	}
	return &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}, VxlanId: int(vni),
		SrcAddr: net.ParseIP(local), Group: net.ParseIP(remote), Port: plan.EngineVXLANPort, Learning: false}
}

// dial connects to the holder and takes its copies' ifindexes; it runs on the FE's worker, so
// no change of the FE is under way. The FE counts as synced only after the mirror's next copy.
func (f *fe) dial() error {
	if f.remote.guest != "" {
		return f.dialGuest()
	}
	conn, err := dialPrivileged(f.remote.addr, time.Second)
	if err != nil {
		return err
	}
	var hello wireHello
	dec := gob.NewDecoder(conn)
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if err := dec.Decode(&hello); err != nil {
		conn.Close()
		return err
	}
	if hello.Engine != f.index {
		conn.Close()
		return fmt.Errorf("%w: %s holds engine %d, not %d", ErrConfig, f.remote.addr, hello.Engine, f.index)
	}
	f.links = hello.Links
	r := f.remote
	r.mu.Lock()
	r.conn, r.codec = conn, gobCodec{gob.NewEncoder(conn), dec}
	r.mu.Unlock()
	r.up.Store(true)
	return nil
}

// call sends one request and waits for its reply; a connection that fails is dropped.
func (r *remoteFE) call(req wireReq) (wireReply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		return wireReply{}, errDown
	}
	r.conn.SetDeadline(time.Now().Add(10 * time.Second))
	rep, err := r.codec.roundTrip(req)
	if err != nil {
		r.conn.Close()
		r.conn = nil
		r.up.Store(false)
		r.synced.Store(false)
		return rep, fmt.Errorf("%w: %v", errDown, err)
	}
	return rep, nil
}

func (r *remoteFE) change(req wireReq) error {
	rep, err := r.call(req)
	if err != nil {
		return err
	}
	return rep.err()
}

func (r *remoteFE) AddrReplace(link netlink.Link, a *netlink.Addr) error {
	return r.change(wireReq{Op: opAddr, Link: link.Attrs().Index, Addr: a.IPNet.String(), Flags: a.Flags})
}

func (r *remoteFE) AddrDel(link netlink.Link, a *netlink.Addr) error {
	return r.change(wireReq{Op: opAddrDel, Link: link.Attrs().Index, Addr: a.IPNet.String(), Flags: a.Flags})
}

func (r *remoteFE) NeighSet(n *netlink.Neigh) error {
	return r.change(wireReq{Op: opNeigh, Link: n.LinkIndex, Family: n.Family, IP: n.IP, MAC: n.HardwareAddr})
}

func (r *remoteFE) NeighDel(n *netlink.Neigh) error {
	return r.change(wireReq{Op: opNeighDel, Link: n.LinkIndex, Family: n.Family, IP: n.IP, MAC: n.HardwareAddr})
}

func (r *remoteFE) send(changes []rtChange) (map[int]syscall.Errno, error) {
	req := wireReq{Op: opRoutes, Changes: make([]wireChange, len(changes))}
	for i, c := range changes {
		req.Changes[i] = wireChange{Typ: c.typ, Body: c.body}
	}
	rep, err := r.call(req)
	if err != nil {
		return nil, err
	}
	fails := make(map[int]syscall.Errno, len(rep.Fails))
	for i, e := range rep.Fails {
		fails[i] = syscall.Errno(e)
	}
	return fails, rep.err()
}

func (r *remoteFE) dump() ([]*rtMsg, error) {
	rep, err := r.call(wireReq{Op: opDump})
	if err == nil {
		err = rep.err()
	}
	if err != nil {
		return nil, err
	}
	return parseChanges(rep.Routes)
}

func (r *remoteFE) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil {
		r.conn.Close()
		r.conn = nil
	}
}
