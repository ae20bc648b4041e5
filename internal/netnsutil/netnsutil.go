// Package netnsutil runs code inside Linux network namespaces from a Go program: it creates
// anonymous namespaces, runs a function on a thread that has entered one, writes net.* sysctls
// and receive packet steering masks there, and mounts file systems on a throwaway thread that
// no other code sees. Go schedules goroutines over threads, and a namespace belongs to a
// thread, so every function here locks its goroutine to one thread for the time it needs.
package netnsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// New creates an anonymous network namespace: no bind mount under /run/netns and no process
// holds it, so it lives exactly as long as the returned handle (and whatever was opened in it);
// closing the handle frees it, and it cannot outlive the process.
func New() (netns.NsHandle, error) {
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
		return netns.None(), fmt.Errorf("returning to the original network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ns, nil
}

// Do runs f on a thread inside network namespace ns, then returns the thread to where it was.
// Sockets opened by f stay in ns; /proc/sys/net and netlink sockets opened by f show ns. If
// the thread cannot return, it stays locked and the runtime discards it with the goroutine,
// rather than let it run other goroutines inside ns.
func Do(ns netns.NsHandle, f func() error) error {
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

// Sysctl writes sysctls inside namespace ns (net.* ones: the others are not per namespace).
// Keys are written as sysctl(8) writes them, with dots (net.ipv4.ip_forward) or slashes
// (net/ipv4/ip_forward).
func Sysctl(ns netns.NsHandle, values map[string]string) error {
	return Do(ns, func() error { return WriteSysctls(values) })
}

// SysctlPrivate is Sysctl through a proc file system of its own, made for the call and
// mounted nowhere. No one else can mount over its files or plant links in it (a node's root
// can, in the node's /proc, and host root's write would then land on a host-wide setting), and
// its lookups do not walk the host /proc's cache, where every namespace's /proc/sys/net
// entries of one name share a hash chain (so that writes through it slow down with every
// namespace).
func SysctlPrivate(ns netns.NsHandle, values map[string]string) error {
	if len(values) == 0 {
		return nil
	}
	return Do(ns, func() error {
		proc, err := privateProc()
		if err != nil {
			return fmt.Errorf("sysctl: a proc file system of its own: %w", err)
		}
		defer unix.Close(proc)
		for k, v := range values {
			if err := writeProcAt(proc, "sys/"+sysctlPath(k), v); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", k, v, err)
			}
		}
		return nil
	})
}

// privateProc returns a new proc file system's root, mounted nowhere (fsmount).
func privateProc() (int, error) {
	fs, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, err
	}
	return unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}

// writeProcAt writes value into the file path below dir (a proc root), without leaving its
// mount or following a symbolic link.
func writeProcAt(dir int, path, value string) error {
	fd, err := unix.Openat2(dir, path, &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(value))
	return err
}

// sysctlPath is a sysctl key as a path below /proc/sys.
func sysctlPath(key string) string {
	if strings.Contains(key, "/") {
		return key
	}
	return strings.ReplaceAll(key, ".", "/")
}

// WriteSysctls writes sysctls in the calling thread's namespaces, keys as for Sysctl.
func WriteSysctls(values map[string]string) error { return writeSysctls("/proc/sys", values) }

func writeSysctls(dir string, values map[string]string) error {
	for k, v := range values {
		if err := os.WriteFile(filepath.Join(dir, sysctlPath(k)), []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", k, v, err)
		}
	}
	return nil
}

// WithPrivateMount runs f on a thread of its own that first runs enter, then unshares its
// mount namespace, makes every mount private and mounts a fstype file system on target: only
// that thread sees the mount, and the thread is thrown away with it afterwards (it stays locked
// to its goroutine, which ends). Nothing is mounted anywhere else.
func WithPrivateMount(enter func() error, fstype, target string, f func() error) error {
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

// SetRPS sets the receive packet steering CPU mask (CPUMask) of interface ifname inside
// namespace ns, so that the frames it receives are processed on those CPUs. Sysfs shows the
// devices of the network namespace it was mounted in, so unless ns is the caller's own, a
// throwaway thread enters ns and mounts a sysfs of its own there (WithPrivateMount).
func SetRPS(ns netns.NsHandle, ifname, mask string) error {
	if self, err := netns.Get(); err == nil {
		same := self.Equal(ns)
		self.Close()
		if same { // the caller's own sysfs shows it
			return writeRPS(ifname, mask)
		}
	}
	return WithPrivateMount(func() error { return netns.Set(ns) }, "sysfs", "/sys", func() error {
		// The sysfs of a namespace that another user namespace owns (a trellis node's) comes
		// read-only; the machine's root may write rps_cpus there once it is remounted.
		if err := unix.Mount("", "/sys", "", unix.MS_REMOUNT, ""); err != nil {
			return fmt.Errorf("remounting sysfs read-write: %w", err)
		}
		return writeRPS(ifname, mask)
	})
}

func writeRPS(ifname, mask string) error {
	path := filepath.Join("/sys/class/net", ifname, "queues/rx-0/rps_cpus")
	if err := os.WriteFile(path, []byte(mask), 0o644); err != nil {
		return fmt.Errorf("rps_cpus of %s: %w", ifname, err)
	}
	return nil
}

// CPUMask is the hexadecimal mask of one CPU, as rps_cpus takes it; -1: none (no steering).
func CPUMask(cpu int) string {
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
