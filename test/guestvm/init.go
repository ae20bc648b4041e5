package guestvm

// The guest's side: the harness binary is the guest's /init (pid 1 in the initramfs). It loads
// the drivers of the host's shared root (virtio PCI, 9p, overlayfs), mounts that root read-only
// under a tmpfs overlay, moves it to /, mounts what a Debian 12 machine has (proc, sys, devtmpfs,
// devpts, cgroup2, bpffs, tmpfs /run and /dev/shm) and the kernel package's modules as
// /lib/modules/RELEASE, runs the command, writes its exit status to the results directory, and
// powers the guest off.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// spec is what the host asks the guest to run (results/spec.json).
type spec struct {
	Argv     []string
	Env      []string
	Dir      string
	Modules  string // the kernel package's lib/modules/RELEASE, a path in the host's root
	Release  string
	Hostname string
	Address  string // eth0's address when the guest has a network card (Config.NIC)
}

// Files of the results directory (a 9p share of a host directory, /run/guestvm in the guest).
const (
	specFile    = "spec.json"
	statusFile  = "status"  // "exit N": written once the command has ended
	outputFile  = "output"  // the command's standard output and error
	consoleFile = "console" // the guest's serial console, written by QEMU
	startedFile = "started" // written when the command starts
	resultsDir  = "/run/guestvm"
)

// IsGuest tells whether this process is the guest's init.
func IsGuest() bool { return os.Getpid() == 1 }

// Init is the guest's init. It never returns: it powers the guest off (or panics, which the
// kernel turns into a reboot that ends QEMU: the host then finds no status).
func Init() {
	err := initGuest()
	fmt.Fprintf(os.Stderr, "guestvm: init: %v\n", err)
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func initGuest() error {
	for _, m := range []struct{ src, dir, fs string }{{"dev", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sys", "/sys", "sysfs"}} {
		if err := mount(m.src, m.dir, m.fs, 0, ""); err != nil {
			return err
		}
	}
	if con, err := os.OpenFile("/dev/console", os.O_RDWR, 0); err == nil {
		for fd := 0; fd < 3; fd++ {
			unix.Dup2(int(con.Fd()), fd)
		}
	}
	if err := loadBootModules(); err != nil {
		return err
	}
	const ninep = "trans=virtio,version=9p2000.L,msize=262144,access=any"
	if err := mount("results", "/results", "9p", 0, ninep); err != nil {
		return err
	}
	var s spec
	data, err := os.ReadFile("/results/" + specFile)
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	if err != nil {
		return fmt.Errorf("reading the host's spec: %w", err)
	}
	if err := mountRoot(ninep); err != nil {
		return err
	}
	if err := switchRoot(s); err != nil {
		return err
	}
	return runCommand(s)
}

// loadBootModules loads the modules the initramfs holds, in the order of /modules.txt.
func loadBootModules() error {
	list, err := os.ReadFile("/modules.txt")
	if err != nil {
		return err
	}
	for _, m := range strings.Fields(string(list)) {
		f, err := os.Open(filepath.Join("/modules", filepath.Base(m)))
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("loading %s: %w", m, err)
		}
	}
	return nil
}

// mountRoot mounts the host's root read-only at /lower and an overlay with a tmpfs upper layer
// at /newroot: what the guest writes stays in its memory and goes with it.
func mountRoot(ninep string) error {
	if err := mount("hostroot", "/lower", "9p", unix.MS_RDONLY, ninep+",cache=loose"); err != nil {
		return err
	}
	if err := mount("rw", "/rw", "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	for _, d := range []string{"/rw/upper", "/rw/work"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	return mount("overlay", "/newroot", "overlay", 0, "lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work")
}

// switchRoot mounts the guest's file systems under /newroot and makes it the root.
func switchRoot(s spec) error {
	mods := "/newroot/lib/modules/" + s.Release
	for _, m := range []struct {
		src, dir, fs string
		flags        uintptr
		data         string
	}{
		{"proc", "/newroot/proc", "proc", 0, ""},
		{"sys", "/newroot/sys", "sysfs", 0, ""},
		{"dev", "/newroot/dev", "devtmpfs", 0, ""},
		{"devpts", "/newroot/dev/pts", "devpts", 0, "gid=5,mode=620,ptmxmode=666"},
		{"shm", "/newroot/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"run", "/newroot/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
		{"cgroup2", "/newroot/sys/fs/cgroup", "cgroup2", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "nsdelegate"},
		{"bpf", "/newroot/sys/fs/bpf", "bpf", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "mode=0700"},
		{"debugfs", "/newroot/sys/kernel/debug", "debugfs", 0, ""},
		{"tracefs", "/newroot/sys/kernel/tracing", "tracefs", 0, ""},
		// Trellis's own state starts empty, as on a fresh machine: the host's, which other
		// runs change meanwhile, reached the guest through 9p's cache stale (a uid range
		// listed there but deleted on the host failed `up` in the guest).
		{"state", "/newroot/var/lib/trellis", "tmpfs", 0, "mode=0700"},
		{"uidranges", "/newroot/var/lib/trellis-uid-ranges", "tmpfs", 0, "mode=0755"},
		{"/results", "/newroot" + resultsDir, "", unix.MS_MOVE, ""},
		{"/newroot" + s.Modules, mods, "", unix.MS_BIND, ""},
	} {
		if err := mount(m.src, m.dir, m.fs, m.flags, m.data); err != nil {
			return err
		}
	}
	if err := os.Chdir("/newroot"); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving the root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	return os.Chdir("/")
}

// mount makes dir and mounts there.
func mount(src, dir, fs string, flags uintptr, data string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, dir, fs, flags, data); err != nil {
		return fmt.Errorf("mounting %s on %s: %w", src, dir, err)
	}
	return nil
}

// runCommand sets up what a machine has at boot (host name, loopback, cgroup controllers
// delegated from the root as systemd does), runs the command, and writes its status.
func runCommand(s spec) error {
	unix.Sethostname([]byte(s.Hostname))
	if lo, err := netlink.LinkByName("lo"); err == nil {
		netlink.LinkSetUp(lo)
	}
	if s.Address != "" {
		if err := nic(s.Address); err != nil { // without it the guest is no use to its test
			return err
		}
	} else if err := uplink(); err != nil {
		fmt.Fprintf(os.Stderr, "guestvm: the guest's uplink: %v\n", err)
	}
	if ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		var on []string
		for _, c := range strings.Fields(string(ctl)) {
			on = append(on, "+"+c)
		}
		os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte(strings.Join(on, " ")), 0)
	}
	out, err := os.Create(filepath.Join(resultsDir, outputFile))
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(io.MultiWriter(os.Stdout, out), bufio.NewReader(r))
		close(copied)
	}()
	fmt.Fprintf(os.Stdout, "guestvm: running %q (Linux %s)\n", s.Argv, s.Release)
	os.WriteFile(filepath.Join(resultsDir, startedFile), nil, 0o644)
	for _, kv := range s.Env { // exec.Command looks a bare name up in init's own PATH
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			os.Setenv("PATH", path)
		}
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = s.Env, s.Dir, w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	code := 127
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(w, "guestvm: %v\n", err)
	} else {
		code = reapUntil(cmd.Process.Pid)
	}
	w.Close()
	select { // a daemon the command left may hold the pipe: stop waiting for it
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	out.Close()
	if err := os.WriteFile(filepath.Join(resultsDir, statusFile), fmt.Appendf(nil, "exit %d\n", code), 0o644); err != nil {
		return err
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	return errors.New("poweroff returned")
}

// uplink gives the guest what a machine has and some tests look for: an interface with an
// IPv4 address and a default route through it. It is a dummy device (the guest has no network
// card): frames sent to it go nowhere.
func uplink() error {
	d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}}
	if err := netlink.LinkAdd(d); err != nil {
		return err
	}
	addr, _ := netlink.ParseAddr("198.18.255.2/24")
	if err := netlink.AddrAdd(d, addr); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(d); err != nil {
		return err
	}
	gw, _ := netlink.ParseAddr("198.18.255.1/32")
	return netlink.RouteAdd(&netlink.Route{LinkIndex: d.Attrs().Index, Gw: gw.IP})
}

// nic gives the guest's network card (eth0, which virtio_net names so: the initramfs loaded it)
// its address and brings it up.
func nic(address string) error {
	addr, err := netlink.ParseAddr(address)
	if err != nil {
		return err
	}
	var l netlink.Link
	for i := 0; ; i++ { // the card's probe may still run
		if l, err = netlink.LinkByName("eth0"); err == nil || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("the network card: %w", err)
	}
	if err := netlink.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("the network card's address: %w", err)
	}
	return netlink.LinkSetUp(l)
}

// reapUntil waits for every child (pid 1 inherits the orphans: a zombie left would look like a
// process still running) until pid ends, and returns pid's exit code (128+N for signal N).
func reapUntil(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 127
		}
		if got != pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
