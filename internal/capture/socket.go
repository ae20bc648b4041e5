package capture

import (
	"context"
	"errors"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// socket is an AF_PACKET socket bound to one device: a port in the root namespace, or
// (inside) a node's interface in the node's namespace, where what the node sends is outgoing.
type socket struct {
	fd     int
	inside bool
}

// htons is the byte order AF_PACKET wants its protocol in.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openSocket opens a packet socket on device ifindex with filter (nil: every frame), attached
// before binding so that no unfiltered frame gets in.
func openSocket(ifindex int, filter []bpf.RawInstruction) (*socket, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, err
	}
	s := &socket{fd: fd}
	if filter != nil {
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: (*unix.SockFilter)(unsafe.Pointer(&filter[0]))}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
			s.close()
			return nil, err
		}
	}
	// Wake up now and then to see whether the capture is over.
	tv := unix.Timeval{Usec: 200000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		s.close()
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *socket) close() { unix.Close(s.fd) }

// read sends the frames of tap t to out until ctx ends: those entering the port (sent by its
// node interface), and with t.Received those leaving it.
func (s *socket) read(ctx context.Context, t Tap, out chan<- frame) error {
	buf := make([]byte, Snaplen)
	for ctx.Err() == nil {
		n, from, err := unix.Recvfrom(s.fd, buf, unix.MSG_TRUNC)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok {
			continue
		}
		dir := t.Sent
		if (ll.Pkttype == unix.PACKET_OUTGOING) != s.inside { // the node received it
			if !t.Received {
				continue
			}
			dir = Inbound
		}
		data := append([]byte(nil), buf[:min(n, len(buf))]...)
		select {
		case out <- frame{iface: t.Iface, ts: time.Now(), data: data, orig: n, dir: dir}:
		case <-ctx.Done():
		}
	}
	return nil
}
