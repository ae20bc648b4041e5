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
// Every function of this package works in that namespace: none is to be called from a thread
// that entered another (package netnsutil's Do).

// maxIdleHandles is how many idle sockets are kept: about the number of workers that create
// devices at once (package substrate).
const maxIdleHandles = 16

var idle = make(chan *netlink.Handle, maxIdleHandles)

// handle returns an idle routing socket, or a new one.
func handle() (*netlink.Handle, error) {
	select {
	case h := <-idle:
		return h, nil
	default:
		return netlink.NewHandle(unix.NETLINK_ROUTE)
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
	h, err := handle()
	if err != nil {
		return err
	}
	err = f(h)
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
