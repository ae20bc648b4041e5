package netdev

import (
	"errors"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The package-level functions of vishvananda/netlink open a netlink socket for every request
// and close it after (socket, bind, registration with Go's poller, close): in a 1000-node up,
// with a few requests per port, that was about 8% of trellis's CPU (perf record -a -g, 2026-11-26).
// This package keeps routing sockets of the process's network namespace for reuse instead.
// A caller whose thread entered another namespace (package netnsutil's Do) gets a socket of
// that namespace, opened for its request and closed after it.

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

// handle returns an idle routing socket, or a new one; kept tells whether it may be kept
// after use (it is of the process's namespace).
func handle() (h *netlink.Handle, kept bool, err error) {
	if ns := threadNs(); ns == 0 || ns != homeNs {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return h, false, err
	}
	select {
	case h := <-idle:
		return h, true, nil
	default:
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return h, true, err
	}
}

// release keeps h for reuse if the request that used it ended cleanly, with an answer from the
// kernel (nil, or an errno the kernel sent); after any other failure the socket may hold a
// late answer, so it is closed.
func release(h *netlink.Handle, err error) {
	var errno syscall.Errno
	var notFound netlink.LinkNotFoundError
	if err != nil && !errors.As(err, &errno) && !errors.As(err, &notFound) && !errors.Is(err, netlink.ErrDumpInterrupted) {
		h.Close()
		return
	}
	select {
	case idle <- h:
	default:
		h.Close()
	}
}

// Do runs f with a routing socket of the process's network namespace, kept for reuse.
func Do(f func(h *netlink.Handle) error) error {
	h, kept, err := handle()
	if err != nil {
		return err
	}
	err = f(h)
	if !kept {
		h.Close()
		return err
	}
	release(h, err)
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
