package delay

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The delay line: a process of the substrate that holds the frames of one port's delay pair.
// delay_hold (internal/dataplane) puts each frame the port's node sends into the ingress of
// the pair's hold end; the line reads it there from a packet socket, holds it until its time
// (now + the delay + a jitter drawn from the distribution's table) and sends it out of the hold
// end, from which it reaches the return end and goes back into the port. Frames leave in the
// order of their times, so a jitter larger than the gap between two frames reorders them, as
// netem does. The socket carries each frame's offload header (PACKET_VNET_HDR), so that TCP's
// large segments and their pending checksums cross the line as they came.

// vnetHdrLen is the size of struct virtio_net_hdr, in front of every frame on the socket.
const vnetHdrLen = 10

// maxFrame is the largest frame the line takes: a 64 KiB segment, headers and all.
const maxFrame = vnetHdrLen + 65536 + 64

// LineConfig is what a delay line is given on its standard input.
type LineConfig struct {
	Hold     string // the hold end of the port's delay pair
	Settings Settings
}

// line is a running delay line.
type line struct {
	fd    int
	s     Settings
	table []int16
	held  held
	seq   uint64
}

// LineMain is the delay line process: it reads its LineConfig on stdin, opens its socket, says
// "ok" on fd 3 and holds frames until the hold end goes (the socket fails) or it is killed.
func LineMain() {
	ready := os.NewFile(3, "ready")
	var c LineConfig
	l, err := func() (*line, error) {
		if err := json.NewDecoder(os.Stdin).Decode(&c); err != nil {
			return nil, err
		}
		return openLine(c)
	}()
	if err != nil {
		fmt.Fprintf(ready, "error: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprint(ready, "ok\n")
	ready.Close()
	debug.SetGCPercent(-1) // see held: the line allocates nothing per frame once it has run a while
	err = l.run()
	fmt.Fprintf(os.Stderr, "trellis delay line on %s: %v\n", c.Hold, err)
	os.Exit(1)
}

// openLine opens a packet socket on the hold end that sees only the frames coming in.
func openLine(c LineConfig) (*line, error) {
	iface, err := ifindex(c.Hold)
	if err != nil {
		return nil, err
	}
	proto := htons(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	for _, o := range []struct{ level, opt, v int }{
		{unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1},
		{unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1},
		{unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16 << 20},
		{unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 16 << 20},
		{unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1},
	} {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("packet socket option %d: %w", o.opt, err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: iface}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding to %s: %w", c.Hold, err)
	}
	return &line{fd: fd, s: c.Settings, table: Table(c.Settings.Distribution)}, nil
}

func ifindex(name string) (int, error) {
	data, err := os.ReadFile("/sys/class/net/" + name + "/ifindex")
	if err != nil {
		return 0, fmt.Errorf("no device %s: %w", name, err)
	}
	var i int
	_, err = fmt.Sscan(string(data), &i)
	return i, err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// receiver reads frames and their control messages from a packet socket without allocating
// (unix.Recvmsg makes a new address for every frame).
type receiver struct {
	fd       int
	buf, oob []byte
	iov      unix.Iovec
	msg      unix.Msghdr
}

func newReceiver(fd int) *receiver {
	rx := &receiver{fd: fd, buf: make([]byte, maxFrame), oob: make([]byte, 128)}
	rx.iov.Base = &rx.buf[0]
	rx.iov.SetLen(len(rx.buf))
	rx.msg.Iov = &rx.iov
	rx.msg.Iovlen = 1
	rx.msg.Control = &rx.oob[0]
	return rx
}

// recv reads one frame into rx.buf without waiting; it returns its length and its control
// messages, or EAGAIN when none is waiting.
func (rx *receiver) recv() (int, []byte, error) {
	rx.msg.SetControllen(len(rx.oob))
	n, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(rx.fd), uintptr(unsafe.Pointer(&rx.msg)), unix.MSG_DONTWAIT)
	if errno != 0 {
		return 0, nil, errno
	}
	return int(n), rx.oob[:rx.msg.Controllen], nil
}

// arrival turns a frame's receive timestamp (CLOCK_REALTIME, the socket's only control
// message) into CLOCK_MONOTONIC, or is now if it has none. It allocates nothing.
func arrival(oob []byte) int64 {
	const hdr = unix.SizeofCmsghdr
	if len(oob) < hdr+int(unsafe.Sizeof(unix.Timespec{})) {
		return monotonic()
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	if h.Level != unix.SOL_SOCKET || h.Type != unix.SO_TIMESTAMPNS {
		return monotonic()
	}
	ts := *(*unix.Timespec)(unsafe.Pointer(&oob[hdr]))
	// The real-time clock first: the time between the two readings then makes the frame's
	// arrival later, never earlier, and so never lets a frame out early.
	var real unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME, &real)
	return monotonic() - max(real.Nano()-ts.Nano(), 0)
}

func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail for this clock
	return ts.Nano()
}

// run holds frames until the socket fails. One thread does everything: it takes the frames
// that came in, sends those that are due, and waits (ppoll, to the nanosecond) until the next
// is due or another comes in. A frame's time counts from when the kernel received it (its
// timestamp), not from when it was read, so a late read does not add to its delay. The thread
// runs at the lowest real-time priority where the machine allows it, so that a busy machine
// runs it on time: it only ever waits, or does work in proportion to the frames it holds (the
// kernel's real-time throttling bounds it under a flood).
func (l *line) run() error {
	runtime.LockOSThread()
	unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0) // best effort
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	rx := newReceiver(l.fd)
	delay, jitter := l.s.Delay.Nanoseconds(), l.s.Jitter.Nanoseconds()
	pfd := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
	var ts unix.Timespec
	for {
		for {
			n, oob, err := rx.recv()
			if err == unix.EAGAIN {
				break
			}
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if l.held.len() >= Limit {
				continue // dropped, as netem drops beyond its limit
			}
			data := l.held.buffer(n)
			copy(data, rx.buf[:n])
			l.held.push(frame{due: arrival(oob) + Sample(delay, jitter, l.table, r), seq: l.seq, data: data})
			l.seq++
		}
		now := monotonic()
		for l.held.len() > 0 && l.held.first().due <= now {
			f := l.held.pop()
			// A frame the hold end will not take (it went down) is dropped, as a qdisc drops it.
			unix.Write(l.fd, f.data)
			l.held.release(f.data)
		}
		var timeout *unix.Timespec // none: wait for a frame
		if l.held.len() > 0 {
			ts = unix.NsecToTimespec(max(l.held.first().due-monotonic(), 0))
			timeout = &ts
		}
		if _, err := unix.Ppoll(pfd, timeout, nil); err != nil && err != unix.EINTR {
			return err
		}
	}
}
