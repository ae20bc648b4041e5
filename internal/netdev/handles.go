package netdev

import (
	"errors"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The package-level functions of vishvananda/netlink open a netlink socket for every request
// and close it after (socket, bind, registration with Go's poller, close): in a 1000-node up,
// with a few requests per port, that was about 8% of trellis's CPU (perf record -a -g, 2026-11-26).
// This package keeps routing sockets of the process's network namespace for reuse instead.
// A caller whose thread entered another namespace (package netnsutil's Do) gets a socket of
// that namespace, opened for its request and closed after it, unless the namespace is kept
// (Keep): then its sockets are kept too, until the caller is done with it.

// maxIdleHandles is how many idle sockets are kept: about the number of workers that create
// devices at once (package substrate).
const maxIdleHandles = 16

var idle = make(chan *netlink.Handle, maxIdleHandles)

// homeNs is the inode of the network namespace the process started in: sockets are kept only
// for requests made there.
var homeNs = threadNs()

// threadNs returns the inode of the calling thread's network namespace, or 0 if unknown.
func threadNs() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0
	}
	return st.Ino
}

// nsPool is the idle sockets kept for another namespace (Keep), and how many callers keep it.
type nsPool struct {
	idle chan *netlink.Handle
	refs int
}

// pools are the namespaces other than the process's whose sockets are kept, by inode.
var (
	poolsMu sync.Mutex
	pools   = map[uint64]*nsPool{}
)

// handle returns an idle routing socket of the calling thread's namespace, or a new one, and
// the namespace's inode if its sockets are kept (0: close the socket after use).
func handle() (h *netlink.Handle, keptIn uint64, err error) {
	ns := threadNs()
	switch {
	case ns != 0 && ns == homeNs:
		select {
		case h := <-idle:
			return h, ns, nil
		default:
		}
	case ns != 0:
		poolsMu.Lock()
		p := pools[ns]
		if p == nil {
			ns = 0
		} else if len(p.idle) > 0 {
			h = <-p.idle
		}
		poolsMu.Unlock()
		if h != nil {
			return h, ns, nil
		}
	}
	h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	return h, ns, err
}

// release keeps h (a socket of namespace ns; 0: of none kept) for reuse if the request that
// used it ended cleanly, with an answer from the kernel (nil, or an errno the kernel sent);
// after any other failure the socket may hold a late answer, so it is closed.
func release(h *netlink.Handle, ns uint64, err error) {
	var errno syscall.Errno
	var notFound netlink.LinkNotFoundError
	if ns == 0 || err != nil && !errors.As(err, &errno) && !errors.As(err, &notFound) && !errors.Is(err, netlink.ErrDumpInterrupted) {
		h.Close()
		return
	}
	if ns != homeNs {
		poolsMu.Lock()
		defer poolsMu.Unlock()
		if p := pools[ns]; p != nil { // still kept
			select {
			case p.idle <- h:
				return
			default:
			}
		}
		h.Close()
		return
	}
	select {
	case idle <- h:
	default:
		h.Close()
	}
}

// Keep keeps the routing sockets opened on threads inside network namespace ns (another than
// the process's) for reuse, as this package does for the process's own, until the function it
// returns is called: that closes them, since a kept socket holds its namespace alive. A caller
// that makes many requests inside one namespace (the ports of a network in its port
// namespace) keeps it for as long as it works there.
func Keep(ns netns.NsHandle) (done func(), err error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		return nil, err
	}
	ino := st.Ino
	if ino == homeNs {
		return func() {}, nil
	}
	poolsMu.Lock()
	defer poolsMu.Unlock()
	p := pools[ino]
	if p == nil {
		p = &nsPool{idle: make(chan *netlink.Handle, maxIdleHandles)}
		pools[ino] = p
	}
	p.refs++
	var once sync.Once
	return func() {
		once.Do(func() {
			poolsMu.Lock()
			defer poolsMu.Unlock()
			if p.refs--; p.refs > 0 {
				return
			}
			delete(pools, ino)
			for len(p.idle) > 0 {
				(<-p.idle).Close()
			}
		})
	}, nil
}

// Do runs f with a routing socket of the calling thread's network namespace: the process's,
// or one that is kept (Keep), kept for reuse.
func Do(f func(h *netlink.Handle) error) error {
	h, ns, err := handle()
	if err != nil {
		return err
	}
	err = f(h)
	release(h, ns, err)
	return err
}

// Add creates a device (netlink.LinkAdd) through a kept socket.
func Add(link netlink.Link) error {
	return Do(func(h *netlink.Handle) error { return h.LinkAdd(link) })
}

// get returns the device called name (netlink.LinkByName) through a kept socket.
func get(name string) (netlink.Link, error) {
	var dev netlink.Link
	err := Do(func(h *netlink.Handle) error {
		var err error
		dev, err = h.LinkByName(name)
		return err
	})
	return dev, err
}
