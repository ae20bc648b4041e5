package bench

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The bench's own namespaces (source, sink and node under test of the setups without trellis)
// are anonymous: no bind mount under /var/run/netns, no process. They live exactly as long as
// the bench holds their handle, so a bench that dies leaves none behind, and with them go their
// veths, which never have an end in the root namespace.

// newNetns creates an anonymous network namespace; closing the handle frees it.
func newNetns() (netns.NsHandle, error) {
	runtime.LockOSThread()
	origin, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), err
	}
	defer origin.Close()
	ns, err := netns.New() // unshares this thread's network namespace
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), fmt.Errorf("new network namespace: %w", err)
	}
	if err := netns.Set(origin); err != nil {
		ns.Close()
		// The thread stays locked: the runtime discards it with the goroutine.
		return netns.None(), fmt.Errorf("returning to the root network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ns, nil
}

// inNetns runs f on a thread inside network namespace ns. Sockets opened by f stay in ns.
func inNetns(ns netns.NsHandle, f func() error) error {
	runtime.LockOSThread()
	origin, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer origin.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := f()
	if err := netns.Set(origin); err != nil {
		return fmt.Errorf("returning from a network namespace: %w", err) // thread stays locked
	}
	runtime.UnlockOSThread()
	return ferr
}

// sysctlIn writes net.* sysctls (slash-separated keys under /proc/sys) inside namespace ns.
func sysctlIn(ns netns.NsHandle, values map[string]string) error {
	return inNetns(ns, func() error {
		for k, v := range values {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", k, v, err)
			}
		}
		return nil
	})
}

// setRPS sets the receive packet steering CPU mask of interface ifname inside namespace ns, so
// that frames it receives are processed on those CPUs. Sysfs shows the devices of the network
// namespace it was mounted in, so a thread of our own enters ns, takes a private mount namespace,
// mounts a sysfs there and writes the mask. That thread is then thrown away with its mounts
// (it stays locked to its goroutine, which ends): nothing is mounted anywhere else.
func setRPS(ns netns.NsHandle, ifname, mask string) error {
	if self, err := netns.Get(); err == nil {
		same := self.Equal(ns)
		self.Close()
		if same { // the root namespace's own sysfs shows it
			return writeRPS(ifname, mask)
		}
	}
	return withPrivateMount(func() error { return netns.Set(ns) }, "sysfs", "/sys", func() error { return writeRPS(ifname, mask) })
}

// withPrivateMount runs f on a thread of its own that first runs enter, then unshares its mount
// namespace, makes every mount private and mounts a fstype file system on target: only that
// thread sees the mount, and the thread is thrown away with it afterwards (it stays locked to
// its goroutine, which ends).
func withPrivateMount(enter func() error, fstype, target string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		errc <- func() error {
			if err := enter(); err != nil {
				return err
			}
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("private mount namespace: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("private mounts: %w", err)
			}
			if err := unix.Mount(fstype, target, fstype, 0, ""); err != nil {
				return fmt.Errorf("mounting %s on %s: %w", fstype, target, err)
			}
			return f()
		}()
	}()
	return <-errc
}

func writeRPS(ifname, mask string) error {
	path := filepath.Join("/sys/class/net", ifname, "queues/rx-0/rps_cpus")
	if err := os.WriteFile(path, []byte(mask), 0o644); err != nil {
		return fmt.Errorf("rps_cpus of %s: %w", ifname, err)
	}
	return nil
}

// cpuMask is the hexadecimal mask of one CPU, as rps_cpus takes it; -1: none (no steering).
func cpuMask(cpu int) string {
	if cpu < 0 {
		return "0"
	}
	words := []string{}
	for w := cpu / 32; w >= 0; w-- {
		v := uint32(0)
		if w == cpu/32 {
			v = 1 << (cpu % 32)
		}
		words = append(words, fmt.Sprintf("%08x", v))
	}
	return strings.Join(words, ",")
}

// nsLink is one interface inside a namespace, with a netlink handle there.
type nsLink struct {
	ns   netns.NsHandle
	nl   *netlink.Handle
	name string
}

func openLink(ns netns.NsHandle, name string) (*nsLink, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	return &nsLink{ns: ns, nl: h, name: name}, nil
}

func (l *nsLink) Close() { l.nl.Close() }

func (l *nsLink) link() (netlink.Link, error) {
	lk, err := l.nl.LinkByName(l.name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", l.name, err)
	}
	return lk, nil
}

func (l *nsLink) index() (int, error) {
	lk, err := l.link()
	if err != nil {
		return 0, err
	}
	return lk.Attrs().Index, nil
}

func (l *nsLink) mac() (net.HardwareAddr, error) {
	lk, err := l.link()
	if err != nil {
		return nil, err
	}
	return lk.Attrs().HardwareAddr, nil
}

// neigh adds a permanent neighbour entry: the sinks drop everything, ARP included.
func (l *nsLink) neigh(ip net.IP, mac net.HardwareAddr) error {
	idx, err := l.index()
	if err != nil {
		return err
	}
	return l.nl.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, IP: ip, HardwareAddr: mac})
}

// vethBetween makes a veth pair with one end (nameA) in namespace a and the other (nameB) in b;
// neither end ever exists in the root namespace.
func vethBetween(a netns.NsHandle, nameA string, b netns.NsHandle, nameB string) error {
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: nameA, Namespace: netlink.NsFd(a)},
		PeerName:      nameB,
		PeerNamespace: netlink.NsFd(b),
	}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("veth %s-%s: %w", nameA, nameB, err)
	}
	return nil
}

// upWithAddr brings an interface (and lo) of a namespace up, with an IPv4 address if given.
func upWithAddr(ns netns.NsHandle, name, cidr string) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, n := range []string{"lo", name} {
		lk, err := h.LinkByName(n)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if n == name && cidr != "" {
			addr, err := netlink.ParseAddr(cidr)
			if err != nil {
				return err
			}
			if err := h.AddrAdd(lk, addr); err != nil {
				return fmt.Errorf("%s: address %s: %w", n, cidr, err)
			}
		}
		if err := h.LinkSetUp(lk); err != nil {
			return fmt.Errorf("%s up: %w", n, err)
		}
	}
	return nil
}
