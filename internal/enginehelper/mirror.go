package enginehelper

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// mirror copies the control node's addresses, neighbours and routes into every FE, and the
// node's own addresses into the classifier's table, from a netlink watch: one goroutine applies
// the changes in the order the kernel reported them.
type mirror struct {
	control netns.NsHandle
	cnl     *netlink.Handle
	fes     []*fe
	dp      *dataplane.Engines
	names   map[int]string    // control node ifindex -> interface name
	resync  chan struct{}     // a remote FE came back: watch and copy anew
	applied map[string]uint64 // route key -> digest of the route every FE has
	guest   *guestSource      // for a VM node: its control VM's agent, watched instead of control

	mu sync.Mutex
	st MirrorStatus
}

// watch subscribes to the control node's changes until stop closes, then copies what is
// there now (so nothing between the two is missed; a change seen twice is applied twice,
// harmlessly).
func (m *mirror) watch(stop <-chan struct{}) (*subscription, error) {
	if m.guest != nil {
		return m.watchGuest(stop)
	}
	sub := &subscription{addrs: make(chan netlink.AddrUpdate, 4096), routes: make(chan []*rtMsg, 4096),
		neighs: make(chan netlink.NeighUpdate, 4096)}
	ns := m.control
	fail := func(e error) { m.failed(fmt.Errorf("netlink watch: %w", e)) }
	// Forced buffers (root may exceed rmem_max): a full table arrives faster than it is applied.
	if err := netlink.AddrSubscribeWithOptions(sub.addrs, stop, netlink.AddrSubscribeOptions{Namespace: &ns, ErrorCallback: fail,
		ReceiveBufferSize: 1 << 22, ReceiveBufferForceSize: true}); err != nil {
		return nil, err
	}
	if err := watchRoutes(ns, sub.routes, stop, fail); err != nil {
		return nil, err
	}
	if err := netlink.NeighSubscribeWithOptions(sub.neighs, stop, netlink.NeighSubscribeOptions{Namespace: &ns, ErrorCallback: fail,
		ReceiveBufferSize: 1 << 22, ReceiveBufferForceSize: true}); err != nil {
		return nil, err
	}
	connected := m.connectedRemotes()
	if err := m.copyAll(); err != nil {
		return sub, err
	}
	markSynced(connected)
	return sub, nil
}

// connectedRemotes lists the FEs' connections to their holders (or engine VMs) that are up.
func (m *mirror) connectedRemotes() []*remoteFE {
	var connected []*remoteFE
	for _, f := range m.fes {
		if f.remote != nil && f.remote.connected() {
			connected = append(connected, f.remote)
		}
	}
	return connected
}

// markSynced notes that the FEs of connected, connected before a copy from the start, have
// everything: they may take frames.
func markSynced(connected []*remoteFE) {
	for _, r := range connected {
		r.synced.Store(r.connected())
	}
}

// subscription is one netlink watch of the control node.
type subscription struct {
	addrs  chan netlink.AddrUpdate
	routes chan []*rtMsg // the route changes of one receive
	neighs chan netlink.NeighUpdate
}

// copyAll copies what the control node has now: addresses, then neighbours, then routes
// (whose next hops need the first two), and removes from the FEs the routes it has not.
func (m *mirror) copyAll() error {
	links, err := m.cnl.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		m.names[l.Attrs().Index] = l.Attrs().Name
	}
	addrs, err := m.cnl.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		m.addr(netlink.AddrUpdate{LinkAddress: *a.IPNet, LinkIndex: a.LinkIndex, Flags: a.Flags, NewAddr: true})
	}
	neighs, err := m.cnl.NeighList(0, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	for _, n := range neighs {
		m.neigh(netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: n})
	}
	return m.copyRoutes()
}

// run applies changes until done closes. When the kernel drops changes for the watch (its
// buffer overflowed: the watch ends), it watches again and copies everything anew. stop ends
// the watch sub.
func (m *mirror) run(done <-chan struct{}, sub *subscription, stop chan struct{}) {
	for {
		m.consume(done, sub)
		close(stop)
		select {
		case <-done:
			return
		default:
		}
		m.mu.Lock()
		m.st.Resyncs++
		m.mu.Unlock()
		for {
			stop = make(chan struct{})
			var err error
			if sub, err = m.watch(stop); err == nil {
				break
			}
			close(stop)
			m.failed(err)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// consume applies the changes of one watch until it ends or done closes.
func (m *mirror) consume(done <-chan struct{}, sub *subscription) {
	for {
		select {
		case <-done:
			return
		case <-m.resync:
			// A remote FE is back: copy everything anew, the routes the others have already
			// too (replacing them there is harmless; the FE that was away has none).
			clear(m.applied)
			return
		case u, ok := <-sub.addrs:
			if !ok {
				return
			}
			m.timed(func() { m.addr(u) })
		case u, ok := <-sub.neighs:
			if !ok {
				return
			}
			m.timed(func() { m.neigh(u) })
		case batch, ok := <-sub.routes:
			if !ok {
				return
			}
			batch, more := drain(batch, sub.routes)
			m.timed(func() { m.routes(batch) })
			if !more {
				return
			}
		}
	}
}

// timed runs f, a change, and notes how long it took; for a VM node, from when the control
// VM's agent saw the change.
func (m *mirror) timed(f func()) {
	t0 := time.Now()
	if m.guest != nil {
		t0 = m.guest.oldest(t0)
	}
	f()
	us := time.Since(t0).Microseconds()
	m.mu.Lock()
	m.st.LastMicros, m.st.MaxMicros = us, max(m.st.MaxMicros, us)
	m.mu.Unlock()
}

func (m *mirror) failed(err error) {
	m.mu.Lock()
	m.st.Errors++
	m.st.LastError = err.Error()
	m.mu.Unlock()
}

func (m *mirror) status() MirrorStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// name returns the control node's interface of ifindex, asking the kernel for one not seen yet.
func (m *mirror) name(ifindex int) string {
	if n, ok := m.names[ifindex]; ok {
		return n
	}
	if m.guest != nil {
		n := m.guest.name(ifindex)
		if n != "" {
			m.names[ifindex] = n
		}
		return n
	}
	if l, err := m.cnl.LinkByIndex(ifindex); err == nil {
		m.names[ifindex] = l.Attrs().Name
		return l.Attrs().Name
	}
	return ""
}

// addr copies an address of one of the node's link interfaces into the FEs (link-local IPv6
// ones the FEs make themselves, from the same MAC), and every address of the node into the
// classifier's table.
func (m *mirror) addr(u netlink.AddrUpdate) {
	ip, ok := netip.AddrFromSlice(u.LinkAddress.IP)
	if !ok {
		return
	}
	if err := m.dp.SetLocal(ip.Unmap(), u.NewAddr); err != nil {
		m.failed(err)
	}
	name := m.name(u.LinkIndex)
	if ip.Is6() && ip.IsLinkLocalUnicast() {
		return
	}
	m.each(func(f *fe) {
		idx, ok := f.links[name]
		if !ok {
			return // not a link interface: the FEs have no copy
		}
		ipn := u.LinkAddress
		a := &netlink.Addr{IPNet: &ipn}
		if ip.Is6() && !ip.Is4In6() {
			a.Flags = unix.IFA_F_NODAD
		}
		link := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}}
		var err error
		if u.NewAddr {
			err = f.ops.AddrReplace(link, a)
		} else if err = f.ops.AddrDel(link, a); errors.Is(err, unix.EADDRNOTAVAIL) {
			err = nil
		}
		if err != nil {
			m.failed(fmt.Errorf("FE %d: address %s on %s: %w", f.index, u.LinkAddress.String(), name, err))
		}
	})
	m.mu.Lock()
	m.st.Addresses++
	m.mu.Unlock()
}

// neigh copies a neighbour entry of a link interface into the FEs as a permanent entry, or
// removes it there when the node lost it.
func (m *mirror) neigh(u netlink.NeighUpdate) {
	n := u.Neigh
	name := m.name(n.LinkIndex)
	if n.IP == nil || n.IP.IsMulticast() {
		return
	}
	gone := u.Type == unix.RTM_DELNEIGH || len(n.HardwareAddr) == 0 ||
		n.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) != 0 || n.State == netlink.NUD_NONE
	m.each(func(f *fe) {
		idx, ok := f.links[name]
		if !ok {
			return
		}
		e := &netlink.Neigh{LinkIndex: idx, Family: n.Family, IP: n.IP, HardwareAddr: n.HardwareAddr, State: netlink.NUD_PERMANENT}
		var err error
		if gone {
			if err = f.ops.NeighDel(e); err != nil && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH)) {
				err = nil
			}
		} else {
			err = f.ops.NeighSet(e)
		}
		if err != nil {
			m.failed(fmt.Errorf("FE %d: neighbour %s on %s: %w", f.index, n.IP, name, err))
		}
	})
	m.mu.Lock()
	m.st.Neighbours++
	m.mu.Unlock()
}

// each runs apply on every FE at once (each FE's worker applies its changes in order) and
// returns when all are done: a change costs the slowest FE's time, not the sum.
func (m *mirror) each(apply func(f *fe)) {
	var wg sync.WaitGroup
	for _, f := range m.fes {
		if f.remote != nil && !f.remote.connected() {
			continue // copied anew when it is back (resync)
		}
		wg.Add(1)
		f.work <- func() {
			defer wg.Done()
			apply(f)
		}
	}
	wg.Wait()
}
