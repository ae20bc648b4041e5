package measure

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The traffic generator: AF_PACKET sockets with PACKET_QDISC_BYPASS, written here rather than
// borrowed from trafgen, fed with sendmmsg(2) in batches of up to 64 frames. It keeps the
// offered rate under control at any rate (trafgen's rate control sleeps between single packets,
// which caps it far below what a veth forwards), it feeds many source interfaces from one
// thread (the scaling setups have one per virtual network), and it needs nothing installed.
//
// Why not PACKET_TX_RING: the kernel builds a ring frame's skb with the frame's bytes left in
// the ring as zero-copy fragments, and a veth into another namespace must then copy them into a
// freshly allocated page (skb_copy_ubufs) before the frame may cross: a page allocation per
// frame, which capped the ring at about 400 kpps here. sendmmsg copies each small frame into a
// linear skb instead, which crosses as it is.

const maxBatch = 64 // frames per sendmmsg

// minBurst is the fewest frames the generator sends at once when it keeps a rate: frames come
// in bursts, as a NIC with interrupt coalescing hands them to the kernel, so that each wake-up
// of the forwarding CPU (costly in a virtual machine) serves many frames at any rate.
const minBurst = 32

// maxDebt bounds how far the generator catches up after falling behind (descheduled, say): a
// longer burst would overflow a receive queue and count as loss of the node under test.
const maxDebt = 256

// TxPort is one source interface and its packet socket.
type TxPort struct {
	fd     int
	addr   unix.RawSockaddrLinklayer
	frames [][]byte // the flows' frames, sent in turn
	flow   int
	// refused counts the frames that the next hop's receive queue refused since SetFrames.
	refused int
	iov     [maxBatch]unix.Iovec
	msgs    [maxBatch]unix.Mmsghdr
}

// OpenTxPort opens a packet socket on interface ifname of namespace ns; SetFrames gives it
// the frames to send.
func OpenTxPort(ns netns.NsHandle, ifname string) (*TxPort, error) {
	p := &TxPort{fd: -1}
	err := netnsutil.Do(ns, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: receives nothing
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		p.fd = fd
		// Frames stay charged to the socket until the sink frees them (veths no longer orphan
		// them). With the default send buffer (about 270 small frames) the generator would wait
		// for the node under test instead of offering more than it forwards; with this one, the
		// next hop's receive queue (netdev_max_backlog frames) overflows first, as a NIC's ring
		// would.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 16<<20); err != nil {
			return fmt.Errorf("SO_SNDBUFFORCE: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
		}
		ifi, err := interfaceIndex(ifname)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi}); err != nil {
			return fmt.Errorf("binding to %s: %w", ifname, err)
		}
		p.addr = unix.RawSockaddrLinklayer{Family: unix.AF_PACKET, Protocol: htons(unix.ETH_P_IP), Ifindex: int32(ifi)}
		return nil
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	for i := range p.msgs {
		h := &p.msgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&p.addr))
		h.Namelen = unix.SizeofSockaddrLinklayer
		h.Iov = &p.iov[i]
		h.Iovlen = 1
	}
	return p, nil
}

func interfaceIndex(name string) (int, error) {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("interface %s: %w", name, err)
	}
	return int(ifr.Uint32()), nil
}

// SetFrames makes the port send these frames, in turn, from the first.
func (p *TxPort) SetFrames(frames [][]byte) {
	p.frames = frames
	p.flow = 0
	p.refused = 0
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Close closes the socket.
func (p *TxPort) Close() {
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}

// send hands n frames (n <= maxBatch) to the kernel and returns how many it took. A frame that
// the next hop's receive queue refused is taken all the same (the veth counts it as dropped):
// that is loss, not an error.
func (p *TxPort) send(n int) (int, error) {
	for i := 0; i < n; i++ {
		f := p.frames[p.flow]
		p.flow++
		if p.flow == len(p.frames) {
			p.flow = 0
		}
		p.iov[i].Base = &f[0]
		p.iov[i].SetLen(len(f))
	}
	done := 0
	for done < n {
		k, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&p.msgs[done])), uintptr(n-done), 0, 0, 0)
		switch {
		case errno == 0 && int(k) == n-done:
			done = n
		case errno == 0 || errno == unix.ENOBUFS:
			done += int(k) + 1 // message k was dropped by the next hop
			p.refused++
		case errno == unix.EINTR || errno == unix.EAGAIN:
		default:
			return done, fmt.Errorf("sending: %w", errno)
		}
	}
	runtime.KeepAlive(p.frames)
	return n, nil
}

// Generator sends frames over one or more transmit ports at a controlled rate, from one thread
// pinned to one CPU.
type Generator struct {
	Ports []*TxPort
	CPU   int // -1: not pinned
}

// Close closes every port.
func (g *Generator) Close() {
	for _, p := range g.Ports {
		p.Close()
	}
}

// Run offers rate frames per second (0: as fast as it can) for dur, spreading them over the
// ports in bursts of at most maxBatch, and returns how many frames it handed to the kernel.
func (g *Generator) Run(rate float64, dur time.Duration) (uint64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if g.CPU >= 0 {
		var all, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &all); err == nil {
			one.Set(g.CPU)
			if err := unix.SchedSetaffinity(0, &one); err == nil {
				defer unix.SchedSetaffinity(0, &all)
			}
		}
	}
	var sent, owed uint64 // owed: frames due so far, counted from start
	base := 0.0           // rate debt forgiven so far, in frames
	pi := 0
	start := time.Now()
	for {
		el := time.Since(start)
		if el >= dur {
			break
		}
		n := maxBatch
		if rate > 0 {
			due := rate*el.Seconds() - base
			if due-float64(sent) > maxDebt {
				base += due - float64(sent) - maxDebt
				due = float64(sent) + maxDebt
			}
			owed = uint64(due)
			if owed < sent+minBurst {
				wait := time.Duration((float64(sent+minBurst) + base - rate*el.Seconds()) / rate * float64(time.Second))
				time.Sleep(min(max(wait, 20*time.Microsecond), time.Millisecond, dur-el))
				continue
			}
			n = int(min(owed-sent, maxBatch))
		}
		p := g.Ports[pi]
		pi++
		if pi == len(g.Ports) {
			pi = 0
		}
		q, err := p.send(n)
		sent += uint64(q)
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}
