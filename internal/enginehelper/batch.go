package enginehelper

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// errReplies is a batch whose replies did not all come back (the socket's buffer overflowed,
// or the kernel did not answer in time).
var errReplies = errors.New("netlink replies lost")

// maxBatch is the most bytes of messages one sendmsg carries (about 3000 routes).
const maxBatch = 256 << 10

// rtSock is a netlink socket in one namespace that sends route changes in batches: many
// messages in one sendmsg, only the last asking for an acknowledgement (the kernel answers
// the others only when they fail, in order, before it).
type rtSock struct {
	s   *nl.NetlinkSocket
	seq uint32
	buf []byte
}

// openRtSock opens a batch socket in namespace ns, with buffers for a batch and its errors.
func openRtSock(ns netns.NsHandle) (*rtSock, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	fd := s.GetFd()
	for _, o := range []struct{ level, opt, val int }{
		{unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 2 * maxBatch},
		{unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8 << 20},
		{unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1}, // errors without a copy of the request
	} {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.val); err != nil {
			s.Close()
			return nil, fmt.Errorf("netlink socket option %d: %w", o.opt, err)
		}
	}
	if err := s.SetReceiveTimeout(&unix.Timeval{Sec: 10}); err != nil {
		s.Close()
		return nil, err
	}
	return &rtSock{s: s}, nil
}

func (r *rtSock) close() { r.s.Close() }

// rtChange is one message of a batch.
type rtChange struct {
	typ  uint16 // RTM_NEWROUTE (made or replaced) or RTM_DELROUTE
	body []byte
}

// send applies changes in order and returns the errors of those that failed, by index.
func (r *rtSock) send(changes []rtChange) (map[int]syscall.Errno, error) {
	fails := map[int]syscall.Errno{}
	for start := 0; start < len(changes); {
		end, size := start, 0
		for end < len(changes) && (end == start || size+unix.NLMSG_HDRLEN+len(changes[end].body) <= maxBatch) {
			size += unix.NLMSG_HDRLEN + rtaAlign(len(changes[end].body))
			end++
		}
		if err := r.sendChunk(changes[start:end], start, fails); err != nil {
			return fails, err
		}
		start = end
	}
	return fails, nil
}

// sendChunk sends changes (whose first is number base of the batch) in one sendmsg and reads
// the replies up to the acknowledgement of the last.
func (r *rtSock) sendChunk(changes []rtChange, base int, fails map[int]syscall.Errno) error {
	first := r.seq + 1
	b := r.buf[:0]
	for i, c := range changes {
		flags := unix.NLM_F_REQUEST
		if c.typ == unix.RTM_NEWROUTE {
			flags |= unix.NLM_F_CREATE | unix.NLM_F_REPLACE
		}
		if i == len(changes)-1 {
			flags |= unix.NLM_F_ACK
		}
		r.seq++
		b = binary.NativeEndian.AppendUint32(b, uint32(unix.NLMSG_HDRLEN+len(c.body)))
		b = binary.NativeEndian.AppendUint16(b, c.typ)
		b = binary.NativeEndian.AppendUint16(b, uint16(flags))
		b = binary.NativeEndian.AppendUint32(b, r.seq)
		b = binary.NativeEndian.AppendUint32(b, 0)
		b = append(b, c.body...)
		for len(b)%unix.NLMSG_ALIGNTO != 0 {
			b = append(b, 0)
		}
	}
	r.buf = b
	if err := unix.Sendto(r.s.GetFd(), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	for {
		msgs, _, err := r.s.Receive()
		if err != nil {
			return fmt.Errorf("%w: %v", errReplies, err)
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 || m.Header.Seq-first >= uint32(len(changes)) {
				continue // not a reply to this batch
			}
			if e := -int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				fails[base+int(m.Header.Seq-first)] = syscall.Errno(e)
			}
			if m.Header.Seq == r.seq {
				return nil
			}
		}
	}
}

// dump returns the routes of every table of the socket's namespace.
func (r *rtSock) dump() ([]*rtMsg, error) {
	for try := 0; ; try++ {
		routes, err := r.dumpOnce()
		if !errors.Is(err, errDumpInterrupted) || try == 20 {
			return routes, err
		}
	}
}

var errDumpInterrupted = errors.New("route dump interrupted")

func (r *rtSock) dumpOnce() ([]*rtMsg, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETROUTE, unix.NLM_F_DUMP)
	req.AddRawData(make([]byte, rtmsgLen)) // every family, every table
	r.seq++
	req.Seq = r.seq
	if err := r.s.Send(req); err != nil {
		return nil, fmt.Errorf("route dump: %w", err)
	}
	var out []*rtMsg
	interrupted := false
	for {
		msgs, _, err := r.s.Receive()
		if err != nil {
			return nil, fmt.Errorf("route dump: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != r.seq {
				continue
			}
			interrupted = interrupted || m.Header.Flags&unix.NLM_F_DUMP_INTR != 0
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				if interrupted {
					return nil, errDumpInterrupted
				}
				return out, nil
			case unix.NLMSG_ERROR:
				return nil, fmt.Errorf("route dump: %w", syscall.Errno(-int32(binary.NativeEndian.Uint32(m.Data))))
			case unix.RTM_NEWROUTE:
				rt, err := parseRoute(m.Header.Type, m.Data)
				if err != nil {
					return nil, err
				}
				out = append(out, rt)
			}
		}
	}
}
