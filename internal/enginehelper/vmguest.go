package enginehelper

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/vmsock"
)

// The mirror of a VM node (docs/vm.md, "Parallel virtual routers"): the control node's routes
// live in its guest's kernel, which the helper cannot watch. Each VM has a third virtio-serial
// port, guest.MirrorPortName, on which its agent serves the remote engines' requests
// (guestserve.go): the helper asks the control VM's agent for its route changes (opWatch, a
// long poll: the agent answers as soon as its netlink watch sees one) and applies them to the
// engine VMs through their agents (opRoutes, opDump), as it does to an FE on another machine.

// MirrorSocket is the unix socket on which the QEMU of VM name (a node, or EngineVM) of network
// netID serves its mirror port, beside its other sockets in a directory only root may enter.
func MirrorSocket(stateID, netID, name string) string {
	return vmsock.Path(stateID, netID, name, vmsock.Mirror)
}

// EngineVM is the name engine i of VM node runs under: NODE@feI (node names cannot hold @).
func EngineVM(node string, i int) string { return node + "@fe" + strconv.Itoa(i) }

// watchAll, in an opWatch's Flags, asks for the whole table (a new watch) rather than changes.
const watchAll = 1

// dialGuest connects to an engine VM's agent and takes the ifindexes of its copies of the
// node's interfaces.
func (f *fe) dialGuest() error {
	r := f.remote
	conn, err := net.DialTimeout("unix", r.guest, time.Second)
	if err != nil {
		return err
	}
	codec := newJSONCodec(conn)
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	rep, err := codec.roundTrip(wireReq{Op: opLinks})
	if err == nil {
		err = rep.err()
	}
	if err != nil {
		conn.Close()
		return fmt.Errorf("engine VM %d: %w", f.index, err)
	}
	links := map[string]int{}
	for name, idx := range rep.Links {
		if r.names[name] {
			links[name] = idx
		}
	}
	f.links = links
	r.mu.Lock()
	r.conn, r.codec = conn, codec
	r.mu.Unlock()
	r.up.Store(true)
	return nil
}

// guestSource is the mirror's connection to the control VM's agent.
type guestSource struct {
	socket string

	mu    sync.Mutex
	links map[int]string // ifindex -> name in the control VM, as its agent last said
	since time.Time      // when the oldest change not yet applied was seen in the guest
}

// watchGuest is watch for a VM node: it connects to the control VM's agent, copies its whole
// table into the engine VMs, and polls the agent for changes, which it sends to the
// subscription's routes until stop closes, the connection fails or the agent lost changes.
func (m *mirror) watchGuest(stop <-chan struct{}) (*subscription, error) {
	g := m.guest
	conn, err := net.DialTimeout("unix", g.socket, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("control VM's agent: %w", err)
	}
	codec := newJSONCodec(conn)
	go func() {
		<-stop
		conn.Close()
	}()
	connected := m.connectedRemotes()
	rep, err := g.call(codec, wireReq{Op: opWatch, Flags: watchAll})
	if err == nil && !rep.Full {
		err = fmt.Errorf("%w: the control VM's agent sent changes for its whole table", errWire)
	}
	if err != nil {
		return nil, fmt.Errorf("control VM's agent: %w", err)
	}
	routes, err := parseChanges(rep.Routes)
	if err != nil {
		return nil, err
	}
	clear(m.names)
	if err := m.copyFrom(routes); err != nil {
		return nil, err
	}
	markSynced(connected)
	sub := &subscription{routes: make(chan []*rtMsg, 64)}
	go g.poll(codec, sub.routes, stop, m.failed)
	return sub, nil
}

// poll asks the agent for changes until stop closes or it fails; routes closes then.
func (g *guestSource) poll(codec *jsonCodec, routes chan<- []*rtMsg, stop <-chan struct{}, fail func(error)) {
	defer close(routes)
	for {
		rep, err := g.call(codec, wireReq{Op: opWatch})
		if err == nil && rep.Full {
			err = fmt.Errorf("%w: the control VM's watch lost changes", errWire)
		}
		var batch []*rtMsg
		if err == nil {
			batch, err = parseChanges(rep.Routes)
		}
		select {
		case <-stop:
			return
		default:
		}
		if err != nil {
			fail(fmt.Errorf("control VM: %w", err))
			return
		}
		if len(batch) == 0 {
			continue
		}
		g.mu.Lock()
		if g.since.IsZero() {
			g.since = time.Now().Add(-time.Duration(rep.Held) * time.Microsecond)
		}
		g.mu.Unlock()
		select {
		case routes <- batch:
		case <-stop:
			return
		}
	}
}

// call sends one request on the control VM's connection and notes the interfaces its reply
// names.
func (g *guestSource) call(codec *jsonCodec, req wireReq) (wireReply, error) {
	codec.conn.SetDeadline(time.Now().Add(guestWatchWait + 10*time.Second))
	rep, err := codec.roundTrip(req)
	if err == nil {
		err = rep.err()
	}
	if err == nil && rep.Links != nil {
		links := make(map[int]string, len(rep.Links))
		for name, idx := range rep.Links {
			links[idx] = name
		}
		g.mu.Lock()
		g.links = links
		g.mu.Unlock()
	}
	return rep, err
}

// name is the control VM's interface of ifindex, as its agent last said, or "".
func (g *guestSource) name(ifindex int) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.links[ifindex]
}

// oldest returns when the oldest change being applied was seen in the guest (now if not
// known), and forgets it.
func (g *guestSource) oldest(now time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.since
	g.since = time.Time{}
	if t.IsZero() || t.After(now) {
		return now
	}
	return t
}

// parseChanges reads route messages from the wire.
func parseChanges(changes []wireChange) ([]*rtMsg, error) {
	out := make([]*rtMsg, 0, len(changes))
	for _, c := range changes {
		m, err := parseRoute(c.Typ, c.Body)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
