// Package rtnl reads devices, addresses and qdiscs over rtnetlink with only the decoding that
// trellis's readers (inspect, /metrics) need. It reads another network namespace either by its
// id in the caller's namespace (IFLA_TARGET_NETNSID, IFA_TARGET_NETNSID), with one Conn reused
// for every namespace and no thread switched, or through a Conn opened in that namespace
// (DialPid), which costs a few system calls more but spares the kernel a walk of every
// namespace id of the machine's namespace for each veth device it lists.
package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	// ErrInterrupted says the kernel interrupted a dump because what it lists changed during
	// it; the Conn's methods try again a few times before they return it.
	ErrInterrupted = errors.New("rtnl: dump interrupted")
	// ErrTruncated says a message did not fit the receive buffer.
	ErrTruncated = errors.New("rtnl: message truncated")
)

// Own names the caller's own namespace where a method takes a namespace id.
const Own = -1

// tries is how many times a dump is tried when the kernel interrupts it.
const tries = 20

// recvSize is the receive buffer. The kernel makes each part of a dump as large as the
// largest buffer the socket was read with (up to 32 KiB): 16 KiB keeps those allocations
// small for the many short dumps of nodes' namespaces, and holds any one message (a dump's
// part holds at least one; the kernel sizes a message at most a page, or what
// rtnl_calcit finds for a filtered dump).
const recvSize = 16 << 10

// Conn is a route netlink socket of the namespace it was opened in, with strict checking of
// requests (which the kernel needs to honour a target namespace in address dumps). A Conn is
// not safe for use by several goroutines at once.
type Conn struct {
	fd  int
	seq uint32
	buf []byte
}

// Dial opens a Conn in the calling thread's network namespace.
func Dial() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("rtnl: socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rtnl: strict checking: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rtnl: bind: %w", err)
	}
	return &Conn{fd: fd, buf: *buffers.Get().(*[]byte)}, nil
}

// buffers are receive buffers, kept between Conns: a reader may open one per namespace.
var buffers = sync.Pool{New: func() any { b := make([]byte, recvSize); return &b }}

// Close closes the socket.
func (c *Conn) Close() error {
	b := c.buf
	c.buf = nil
	buffers.Put(&b)
	return unix.Close(c.fd)
}

// dump sends a dump request of type typ with header hdr and attributes attrs, and calls each
// for every message of the answer (the bytes after the netlink header). An interrupted dump
// is tried again, from the start.
func (c *Conn) dump(typ uint16, hdr []byte, attrs []byte, each func(msg []byte) error) error {
	var err error
	for range tries {
		if err = c.dumpOnce(typ, hdr, attrs, each); !errors.Is(err, ErrInterrupted) {
			return err
		}
	}
	return err
}

func (c *Conn) dumpOnce(typ uint16, hdr []byte, attrs []byte, each func(msg []byte) error) error {
	c.seq++
	req := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(hdr)+len(attrs))
	req = append(append(req, hdr...), attrs...)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], typ)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], c.seq)
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("rtnl: send: %w", err)
	}
	interrupted := false
	for {
		n, _, flags, _, err := unix.Recvmsg(c.fd, c.buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("rtnl: receive: %w", err)
		}
		if flags&unix.MSG_TRUNC != 0 {
			return ErrTruncated
		}
		done, intr, err := c.messages(c.buf[:n], each)
		interrupted = interrupted || intr
		if err != nil || done {
			if err == nil && interrupted {
				err = ErrInterrupted
			}
			return err
		}
	}
}

// messages walks the netlink messages in b that answer the current request; done tells the
// dump ended, intr that a message carried the interrupted flag.
func (c *Conn) messages(b []byte, each func([]byte) error) (done, intr bool, err error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		typ := binary.NativeEndian.Uint16(b[4:])
		flags := binary.NativeEndian.Uint16(b[6:])
		seq := binary.NativeEndian.Uint32(b[8:])
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return false, intr, fmt.Errorf("rtnl: message of %d bytes in %d", l, len(b))
		}
		body := b[unix.NLMSG_HDRLEN:l]
		b = b[min(align(l), len(b)):]
		if seq != c.seq {
			continue // the end of an earlier, abandoned dump
		}
		intr = intr || flags&unix.NLM_F_DUMP_INTR != 0
		switch typ {
		case unix.NLMSG_DONE:
			return true, intr, nil
		case unix.NLMSG_ERROR:
			if len(body) < 4 {
				return true, intr, errors.New("rtnl: short error message")
			}
			if e := int32(binary.NativeEndian.Uint32(body)); e != 0 {
				return true, intr, fmt.Errorf("rtnl: %w", os.NewSyscallError("dump", unix.Errno(-e)))
			}
			return true, intr, nil
		}
		if err := each(body); err != nil {
			return true, intr, err
		}
	}
	return false, intr, nil
}

func align(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// attr is one route attribute.
type attr struct {
	typ uint16
	val []byte
}

// attrs walks the route attributes in b.
func attrs(b []byte, each func(attr)) {
	for len(b) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		if l < unix.SizeofRtAttr || l > len(b) {
			return
		}
		each(attr{typ: binary.NativeEndian.Uint16(b[2:]) &^ unix.NLA_F_NESTED, val: b[unix.SizeofRtAttr:l]})
		b = b[min((l+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1), len(b)):]
	}
}

// int32Attr encodes a route attribute holding a 32-bit integer.
func int32Attr(typ uint16, v int32) []byte {
	b := make([]byte, 8)
	binary.NativeEndian.PutUint16(b[0:], 8)
	binary.NativeEndian.PutUint16(b[2:], typ)
	binary.NativeEndian.PutUint32(b[4:], uint32(v))
	return b
}

// NsID returns the id, in the Conn's namespace, of the network namespace of process pid, or
// -1 if that namespace has none (the kernel gives one to the namespace of a veth device's
// peer as soon as it is listed).
func (c *Conn) NsID(pid int) (int, error) {
	c.seq++
	req := make([]byte, unix.NLMSG_HDRLEN+4, unix.NLMSG_HDRLEN+12)
	req[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC // struct rtgenmsg, padded to 4 bytes
	req = append(req, int32Attr(unix.NETNSA_PID, int32(pid))...)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETNSID)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:], c.seq)
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return -1, fmt.Errorf("rtnl: send: %w", err)
	}
	id := -1
	for {
		n, _, _, _, err := unix.Recvmsg(c.fd, c.buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("rtnl: receive: %w", err)
		}
		got := false
		done, _, err := c.messages(c.buf[:n], func(msg []byte) error {
			got = true
			if len(msg) >= 4 {
				attrs(msg[4:], func(a attr) {
					if a.typ == unix.NETNSA_NSID && len(a.val) >= 4 {
						id = int(int32(binary.NativeEndian.Uint32(a.val)))
					}
				})
			}
			return nil
		})
		if err != nil {
			return -1, fmt.Errorf("namespace id of process %d: %w", pid, err)
		}
		if got || done {
			return id, nil
		}
	}
}
