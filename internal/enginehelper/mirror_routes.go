package enginehelper

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// maxDrain is the most route changes applied as one batch.
const maxDrain = 16384

// watchRoutes sends the control node's route changes to ch, those of one receive at a time,
// until stop closes or the kernel drops changes (ch closes). A full table arrives faster than
// it is applied: the socket's buffer is large (root may exceed rmem_max).
func watchRoutes(ns netns.NsHandle, ch chan<- []*rtMsg, stop <-chan struct{}, fail func(error)) error {
	s, err := nl.SubscribeAt(ns, netns.None(), unix.NETLINK_ROUTE, unix.RTNLGRP_IPV4_ROUTE, unix.RTNLGRP_IPV6_ROUTE)
	if err != nil {
		return err
	}
	if err := s.SetReceiveBufferSize(1<<26, true); err != nil {
		s.Close()
		return err
	}
	go func() {
		<-stop
		s.Close()
	}()
	go func() {
		defer close(ch)
		for {
			msgs, _, err := s.Receive()
			if err != nil {
				select {
				case <-stop:
				default:
					fail(err)
				}
				return
			}
			batch := make([]*rtMsg, 0, len(msgs))
			for _, m := range msgs {
				if m.Header.Type != unix.RTM_NEWROUTE && m.Header.Type != unix.RTM_DELROUTE {
					continue
				}
				rt, err := parseRoute(m.Header.Type, m.Data)
				if err != nil {
					fail(err)
					continue
				}
				batch = append(batch, rt)
			}
			select {
			case ch <- batch:
			case <-stop:
				return
			}
		}
	}()
	return nil
}

// drain adds to batch the changes already waiting in ch, up to maxDrain; more is false when
// ch closed.
func drain(batch []*rtMsg, ch <-chan []*rtMsg) (out []*rtMsg, more bool) {
	for len(batch) < maxDrain {
		select {
		case b, ok := <-ch:
			if !ok {
				return batch, false
			}
			batch = append(batch, b...)
		default:
			return batch, true
		}
	}
	return batch, true
}

// copyRoutes copies the control node's routes into the FEs (those they have already are
// skipped) and removes from the FEs the copied routes the control node has not.
func (m *mirror) copyRoutes() error {
	s, err := openRtSock(m.control)
	if err != nil {
		return err
	}
	defer s.close()
	routes, err := s.dump()
	if err != nil {
		return err
	}
	return m.copyFrom(routes)
}

// copyFrom copies routes, the control node's whole table, into the FEs and removes from them
// the copied routes it has not.
func (m *mirror) copyFrom(routes []*rtMsg) error {
	have := make(map[string]bool, len(routes))
	for _, r := range routes {
		if r.copied() {
			have[r.key()] = true
		}
	}
	m.routes(routes)
	for k := range m.applied {
		if !have[k] {
			delete(m.applied, k)
		}
	}
	return m.prune(have)
}

// prune deletes from every FE the copied routes whose keys are not in have.
func (m *mirror) prune(have map[string]bool) error {
	errs := make([]error, len(m.fes))
	m.each(func(f *fe) {
		routes, err := f.ops.dump()
		if err != nil {
			errs[f.index] = fmt.Errorf("FE %d: %w", f.index, err)
			return
		}
		var dels []rtChange
		for _, r := range routes {
			if r.copied() && !have[r.key()] {
				dels = append(dels, rtChange{typ: unix.RTM_DELROUTE, body: r.body})
			}
		}
		fails, err := f.ops.send(dels)
		m.report(f, dels, fails, err)
	})
	return errors.Join(errs...)
}

// routes applies a batch of the control node's route changes to every FE, in order, each FE
// in one or a few sendmsg calls. Changes the FEs have already (same route, same content) are
// skipped, as are routes of sorts the mirror does not copy.
func (m *mirror) routes(batch []*rtMsg) {
	var todo []*rtMsg
	for _, r := range batch {
		if !r.copied() {
			continue
		}
		k := r.key()
		if r.typ == unix.RTM_NEWROUTE {
			if d, ok := m.applied[k]; ok && d == r.digest() {
				continue
			}
		}
		delete(m.applied, k)
		todo = append(todo, r)
		for _, idx := range r.devices() {
			m.name(int(idx)) // learnt here: the FEs' workers only read m.names
		}
	}
	if len(todo) == 0 {
		return
	}
	failed := make([]map[int]syscall.Errno, len(m.fes))
	m.each(func(f *fe) { failed[f.index] = m.routesInto(f, todo) })
	for i, r := range todo {
		ok := r.typ == unix.RTM_NEWROUTE
		for _, fails := range failed {
			_, bad := fails[i]
			ok = ok && !bad
		}
		if ok {
			m.applied[r.key()] = r.digest()
		}
	}
	m.mu.Lock()
	m.st.Routes += len(todo)
	m.mu.Unlock()
}

// routesInto applies changes to FE f and returns those that failed there, by index. A route
// refused for its preferred source (an address the FE has not) is made again without it.
func (m *mirror) routesInto(f *fe, changes []*rtMsg) map[int]syscall.Errno {
	dev := func(idx int32) (int32, bool) {
		out, ok := f.links[m.names[int(idx)]]
		return int32(out), ok
	}
	var batch []rtChange
	var index []int // of each message of batch in changes
	skipped := map[int]syscall.Errno{}
	for i, r := range changes {
		body, ok := r.translate(dev, false)
		if !ok {
			skipped[i] = 0 // through an interface the FE has no copy of
			continue
		}
		batch = append(batch, rtChange{typ: r.typ, body: body})
		index = append(index, i)
	}
	fails, err := f.ops.send(batch)
	var retry []rtChange
	var retried []int
	for j, e := range fails {
		if r := changes[index[j]]; r.typ == unix.RTM_NEWROUTE && r.hasSrc() {
			body, _ := r.translate(dev, true)
			retry = append(retry, rtChange{typ: r.typ, body: body})
			retried = append(retried, index[j])
			delete(fails, j)
		} else if r.typ == unix.RTM_DELROUTE && (e == unix.ESRCH || e == unix.ENOENT) {
			delete(fails, j)
		}
	}
	m.report(f, batch, fails, err)
	out := skipped
	for j := range fails {
		out[index[j]] = fails[j]
	}
	if err != nil { // replies lost: nothing of this batch is known to be there
		for _, i := range index {
			out[i] = 0
		}
	}
	rfails, err := f.ops.send(retry)
	m.report(f, retry, rfails, err)
	for j := range rfails {
		out[retried[j]] = rfails[j]
	}
	return out
}

// report counts the changes an FE refused, and a batch whose replies were lost.
func (m *mirror) report(f *fe, batch []rtChange, fails map[int]syscall.Errno, err error) {
	if err != nil {
		m.failed(fmt.Errorf("FE %d: %d route changes: %w", f.index, len(batch), err))
	}
	for j, e := range fails {
		if batch[j].typ == unix.RTM_DELROUTE && (e == unix.ESRCH || e == unix.ENOENT) {
			continue
		}
		dst := "default"
		if r, perr := parseRoute(batch[j].typ, batch[j].body); perr == nil && len(r.dst) > 0 {
			dst = fmt.Sprintf("%s/%d", net.IP(r.dst), r.dstLen)
		}
		m.failed(fmt.Errorf("FE %d: route %s: %w", f.index, dst, e))
	}
}
