package enginehelper

import (
	"encoding/gob"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
)

// The mirror's link to an FE on another machine: TCP from the node's helper to the FE's
// holder, one gob-encoded request and reply at a time, so changes are applied in the order
// they were sent. The holder first sends a wireHello with its copies' ifindexes.

// Operations of a wireReq.
const (
	opPing uint8 = iota
	opAddr
	opAddrDel
	opNeigh
	opNeighDel
	opRoutes
	opDump
	opLinks // a VM's interfaces (vmguest.go)
	opWatch // the control VM's route changes since the last opWatch, or all (vmguest.go)
)

// wireHello is the holder's first message.
type wireHello struct {
	Engine int
	Links  map[string]int // interface name -> ifindex in the FE
}

// wireReq is one change (or a ping, or a dump of the FE's routes).
type wireReq struct {
	ID      uint64 `json:",omitempty"` // on a VM's mirror port, which may carry an earlier host's replies
	Op      uint8
	Link    int    // ifindex in the FE
	Addr    string `json:",omitempty"` // an address, CIDR
	Flags   int
	Family  int
	IP      []byte
	MAC     []byte
	Changes []wireChange
}

// wireChange is a route message as the kernel writes it.
type wireChange struct {
	Typ  uint16
	Body []byte
}

// wireReply is a request's outcome: Errno for a failed address or neighbour change, Fails for
// the route changes that failed (by index), Err for anything else.
type wireReply struct {
	ID     uint64 `json:",omitempty"`
	Errno  int
	Err    string
	Fails  map[int]int
	Routes []wireChange
	// On a VM's mirror port (vmguest.go): the guest's interfaces (name -> ifindex), whether
	// Routes is its whole table rather than changes, and how long the oldest change waited in
	// the guest, in microseconds.
	Links map[string]int `json:",omitempty"`
	Full  bool           `json:",omitempty"`
	Held  int64          `json:",omitempty"`
}

// errWire: the request could not be applied at all (the holder said why).
var errWire = errors.New("remote engine")

// replyErr is the error a reply carries.
func (r wireReply) err() error {
	switch {
	case r.Errno != 0:
		return fmt.Errorf("%w: %w", errWire, syscall.Errno(r.Errno))
	case r.Err != "":
		return fmt.Errorf("%w: %s", errWire, r.Err)
	}
	return nil
}

// errReply turns an error of a change into a reply.
func errReply(err error) wireReply {
	var errno syscall.Errno
	switch {
	case err == nil:
		return wireReply{}
	case errors.As(err, &errno):
		return wireReply{Errno: int(errno)}
	}
	return wireReply{Err: err.Error()}
}

// applyReq applies a request to an FE held here.
func applyReq(ops feOps, req wireReq) wireReply {
	link := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: req.Link}}
	switch req.Op {
	case opPing:
		return wireReply{}
	case opAddr, opAddrDel:
		a, err := netlink.ParseAddr(req.Addr)
		if err != nil {
			return errReply(err)
		}
		a.Flags = req.Flags
		if req.Op == opAddr {
			return errReply(ops.AddrReplace(link, a))
		}
		return errReply(ops.AddrDel(link, a))
	case opNeigh, opNeighDel:
		n := &netlink.Neigh{LinkIndex: req.Link, Family: req.Family, IP: req.IP, HardwareAddr: req.MAC, State: netlink.NUD_PERMANENT}
		if req.Op == opNeigh {
			return errReply(ops.NeighSet(n))
		}
		return errReply(ops.NeighDel(n))
	case opRoutes:
		changes := make([]rtChange, len(req.Changes))
		for i, c := range req.Changes {
			changes[i] = rtChange{typ: c.Typ, body: c.Body}
		}
		fails, err := ops.send(changes)
		r := errReply(err)
		r.Fails = map[int]int{}
		for i, e := range fails {
			r.Fails[i] = int(e)
		}
		return r
	case opDump:
		routes, err := ops.dump()
		r := errReply(err)
		for _, rt := range routes {
			r.Routes = append(r.Routes, wireChange{Typ: rt.typ, Body: rt.body})
		}
		return r
	}
	return wireReply{Err: fmt.Sprintf("unknown operation %d", req.Op)}
}

// serveConn applies the requests of one connection to ops until it ends.
func serveConn(conn net.Conn, hello wireHello, ops feOps) error {
	enc, dec := gob.NewEncoder(conn), gob.NewDecoder(conn)
	if err := enc.Encode(hello); err != nil {
		return err
	}
	for {
		var req wireReq
		if err := dec.Decode(&req); err != nil {
			return err
		}
		if err := enc.Encode(applyReq(ops, req)); err != nil {
			return err
		}
	}
}
