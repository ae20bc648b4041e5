package enginehelper

import (
	"bufio"
	"encoding/json"
	"io"
	"time"

	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// guestWatchWait is how long the control VM's agent holds an opWatch that finds no change.
const guestWatchWait = 2 * time.Second

// ServeGuest serves the mirror port of a VM (vmguest.go) inside its guest, for the agent: one
// JSON request a line, each answered with its ID, in order. In an engine VM the helper sends
// the remote engines' requests (applied to the guest's kernel as a holder applies them); in
// the control VM it asks for its route changes. It returns only if the port fails for good.
func ServeGuest(port io.ReadWriter) error {
	s := &guestServer{}
	in := bufio.NewReaderSize(port, 1<<16)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			// The host closed its end: the port reads EOF until it connects again.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var req wireReq
		if json.Unmarshal(line, &req) != nil {
			continue // the rest of a request an earlier host left half-sent
		}
		rep := s.handle(req)
		rep.ID = req.ID
		data, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if _, err := port.Write(append(data, '\n')); err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// guestServer is the state of ServeGuest: its netlink sockets, opened at first need, and the
// control VM's route watch.
type guestServer struct {
	ops   *localOps
	watch *guestWatch
}

func (s *guestServer) handle(req wireReq) wireReply {
	if req.Op == opWatch {
		return s.changes(req.Flags&watchAll != 0)
	}
	if s.ops == nil {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE) // the guest's kernel may lack the others
		if err != nil {
			return errReply(err)
		}
		rt, err := openRtSock(netns.None())
		if err != nil {
			h.Close()
			return errReply(err)
		}
		s.ops = &localOps{h, rt}
	}
	if req.Op == opLinks {
		links, err := guestLinks(s.ops.Handle)
		return wireReply{Links: links, Err: errText(err)}
	}
	return applyReq(s.ops, req)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// guestLinks are the guest's interfaces, name -> ifindex.
func guestLinks(h *netlink.Handle) (map[string]int, error) {
	links, err := netdev.Dump(h.LinkList)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(links))
	for _, l := range links {
		out[l.Attrs().Name] = l.Attrs().Index
	}
	return out, nil
}

// stamped is one receive of the watch and when it came.
type stamped struct {
	at    time.Time
	batch []*rtMsg
}

// guestWatch is the control VM's netlink watch of its routes.
type guestWatch struct {
	stop chan struct{}
	ch   chan stamped // closed when the watch ends (the kernel dropped changes)
}

// changes answers an opWatch: the routes the mirror copies, all of them (a new watch, after
// the first request, a host that asks, or changes the kernel dropped), or the changes since
// the last request, waiting up to guestWatchWait for one.
func (s *guestServer) changes(all bool) wireReply {
	if all || s.watch == nil {
		return s.rewatch()
	}
	var routes []*rtMsg
	var first time.Time
	timer := time.NewTimer(guestWatchWait)
	defer timer.Stop()
	for len(routes) == 0 {
		select {
		case b, ok := <-s.watch.ch:
			if !ok {
				return s.rewatch()
			}
			first = b.at
			routes = copiedOnly(b.batch)
		case <-timer.C:
			return wireReply{}
		}
	}
	for more := true; more && len(routes) < maxDrain; { // and what else is waiting
		select {
		case b, ok := <-s.watch.ch:
			if !ok {
				return s.rewatch()
			}
			routes = append(routes, copiedOnly(b.batch)...)
		default:
			more = false
		}
	}
	rep := s.reply(routes)
	rep.Held = time.Since(first).Microseconds()
	return rep
}

// rewatch ends the watch, watches anew and answers with the whole table (read after the watch
// began, so that no change between the two is lost).
func (s *guestServer) rewatch() wireReply {
	if s.watch != nil {
		close(s.watch.stop)
		s.watch = nil
	}
	w := &guestWatch{stop: make(chan struct{}), ch: make(chan stamped, 4096)}
	raw := make(chan []*rtMsg, 4096)
	if err := watchRoutes(netns.None(), raw, w.stop, func(error) {}); err != nil {
		return wireReply{Err: "route watch: " + err.Error()}
	}
	go func() { // stamps each receive with its time
		defer close(w.ch)
		for b := range raw {
			select {
			case w.ch <- stamped{at: time.Now(), batch: b}:
			case <-w.stop:
				return
			}
		}
	}()
	s.watch = w
	rt, err := openRtSock(netns.None())
	if err != nil {
		return wireReply{Err: err.Error()}
	}
	defer rt.close()
	routes, err := rt.dump()
	if err != nil {
		return wireReply{Err: "route dump: " + err.Error()}
	}
	rep := s.reply(copiedOnly(routes))
	rep.Full = true
	return rep
}

// reply carries routes and the guest's interfaces, which the host needs to read them.
func (s *guestServer) reply(routes []*rtMsg) wireReply {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE) // the guest's kernel may lack the others
	if err != nil {
		return errReply(err)
	}
	defer h.Close()
	rep := wireReply{Routes: make([]wireChange, len(routes))}
	for i, r := range routes {
		rep.Routes[i] = wireChange{Typ: r.typ, Body: r.body}
	}
	rep.Links, err = guestLinks(h)
	if err != nil {
		return errReply(err)
	}
	return rep
}

// copiedOnly keeps the routes the mirror copies (rtMsg.copied).
func copiedOnly(routes []*rtMsg) []*rtMsg {
	out := routes[:0:0]
	for _, r := range routes {
		if r.copied() {
			out = append(out, r)
		}
	}
	return out
}
