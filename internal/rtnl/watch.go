package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// A Watch hears rtnetlink's notifications of devices and addresses from every namespace that
// has an id in the namespace it was opened in (NETLINK_LISTEN_ALL_NSID), and of those ids
// coming and going, and counts, by namespace id, the changes heard. It reads them when asked
// (Sync): the kernel queues a notification on the socket before the change's request returns,
// so after Sync every change made before it is counted. What a reader read of a namespace
// stays true while the namespace's Version is what it was when the read began. A Watch
// records nothing of what changed: a change only says "read again".
type Watch struct {
	fd     int
	mu     sync.Mutex
	buf    []byte
	oob    []byte
	epoch  uint64         // raised when notifications were lost: every namespace changed
	counts map[int]uint64 // changes heard, by namespace id
}

// Version is where a namespace stands in a Watch's count of changes; equal Versions mean no
// change heard between them.
type Version struct{ epoch, count uint64 }

// rtnetlink's multicast groups a Watch joins (RTNLGRP_* of linux/rtnetlink.h).
var watchGroups = []int{unix.RTNLGRP_LINK, unix.RTNLGRP_IPV4_IFADDR, unix.RTNLGRP_IPV6_IFADDR, unix.RTNLGRP_NSID}

// watchBuffer is the Watch socket's receive buffer. Notifications that do not fit (an up of
// a thousand nodes sends tens of thousands between two inspects) are lost, and then every
// namespace is read again once.
const watchBuffer = 4 << 20

// NewWatch opens a Watch in the calling thread's namespace.
func NewWatch() (*Watch, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("rtnl: watch socket: %w", err)
	}
	if err := setUpWatch(fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Watch{fd: fd, buf: make([]byte, 64<<10), oob: make([]byte, unix.CmsgSpace(4)), counts: map[int]uint64{}}, nil
}

// setUpWatch binds fd, joins the groups and asks for every namespace's notifications with
// their ids.
func setUpWatch(fd int) error {
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("rtnl: watch bind: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_LISTEN_ALL_NSID, 1); err != nil {
		return fmt.Errorf("rtnl: watch every namespace: %w", err)
	}
	for _, g := range watchGroups {
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, g); err != nil {
			return fmt.Errorf("rtnl: watch group %d: %w", g, err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, watchBuffer); err != nil {
		return fmt.Errorf("rtnl: watch buffer: %w", err)
	}
	return nil
}

// Sync reads every notification queued, counting the changes.
func (w *Watch) Sync() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		n, oobn, _, _, err := unix.Recvmsg(w.fd, w.buf, w.oob, 0)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil: // ENOBUFS: notifications were lost
			w.epoch++
			continue
		}
		w.note(sourceNsID(w.oob[:oobn]), w.buf[:n])
	}
}

// Version tells where namespace nsid stands, as of the last Sync.
func (w *Watch) Version(nsid int) Version {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Version{w.epoch, w.counts[nsid]}
}

// Close closes the socket.
func (w *Watch) Close() error { return unix.Close(w.fd) }

// note counts the changes in the notifications b from the namespace with id nsid (Own for
// the Watch's own namespace).
func (w *Watch) note(nsid int, b []byte) {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return
		}
		typ, body := binary.NativeEndian.Uint16(b[4:]), b[unix.NLMSG_HDRLEN:l]
		b = b[min(align(l), len(b)):]
		switch typ {
		case unix.RTM_NEWLINK, unix.RTM_DELLINK, unix.RTM_NEWADDR, unix.RTM_DELADDR:
			if nsid != Own {
				w.counts[nsid]++
			}
		case unix.RTM_NEWNSID, unix.RTM_DELNSID: // an id given or taken back: whatever it named is gone
			if len(body) >= 4 {
				attrs(body[4:], func(a attr) {
					if a.typ == unix.NETNSA_NSID && len(a.val) >= 4 {
						w.counts[int(int32(binary.NativeEndian.Uint32(a.val)))]++
					}
				})
			}
		}
	}
}

// sourceNsID reads, from a notification's control messages, the id of the namespace it came
// from; Own when it has none (it came from the Watch's own namespace).
func sourceNsID(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return Own
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_NETLINK && m.Header.Type == unix.NETLINK_LISTEN_ALL_NSID && len(m.Data) >= 4 {
			return int(int32(binary.NativeEndian.Uint32(m.Data)))
		}
	}
	return Own
}

// A Cache keeps what Links and Addrs read of namespaces by id for as long as its Watch hears
// no change in them (Sync the Watch before a round of reads). The devices' counters it keeps are those of the first read: counters
// change without a notification.
type Cache struct {
	w  *Watch
	mu sync.Mutex
	ns map[int]cached
}

type cached struct {
	v     Version
	links []Link
	addrs []Addr
}

// cacheBound is how many namespaces a Cache keeps before it starts again from none.
const cacheBound = 1 << 14

// NewCache makes a Cache that trusts what w hears.
func NewCache(w *Watch) *Cache { return &Cache{w: w, ns: map[int]cached{}} }

// Read returns the devices and addresses of the namespace with id nsid: those kept if no
// change was heard since they were read, otherwise read now, through a Conn of its own (and
// kept). The caller must not change them.
func (c *Cache) Read(nsid int) ([]Link, []Addr, error) {
	v := c.w.Version(nsid)
	c.mu.Lock()
	e, ok := c.ns[nsid]
	c.mu.Unlock()
	if ok && e.v == v {
		return e.links, e.addrs, nil
	}
	conn, err := Dial()
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	links, err := conn.Links(nsid)
	if err != nil {
		return nil, nil, err
	}
	addrs, err := conn.Addrs(nsid)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	if len(c.ns) >= cacheBound {
		clear(c.ns)
	}
	c.ns[nsid] = cached{v: v, links: links, addrs: addrs} // v from before the read: a change during it makes it stale
	c.mu.Unlock()
	return links, addrs, nil
}
