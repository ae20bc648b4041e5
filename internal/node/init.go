package node

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// privateDirs get an empty tmpfs of their own in every node; with /etc (a copy-on-write
// overlay of the host's) they are the only writable places. /var/run is a link to /run.
var privateDirs = []struct {
	path string
	mode string
}{
	{"/run", "0755"}, {"/tmp", "1777"}, {"/var/tmp", "1777"}, {"/var/log", "0755"}, {"/dev/shm", "1777"},
}

// InitMain is the node init process (PID 1 of the node). It never returns.
func InitMain() {
	ready := os.NewFile(3, "ready")
	var cfg Config
	err := json.NewDecoder(os.Stdin).Decode(&cfg)
	if err == nil {
		err = setup(cfg)
	}
	if err != nil {
		fmt.Fprintf(ready, "error: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprint(ready, "ok\n")
	ready.Close()
	reap()
}

func setup(cfg Config) error {
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := mountPrivate(); err != nil {
		return err
	}
	files := append([]File{{Path: "/etc/hostname", Content: cfg.Hostname + "\n"}}, cfg.Files...)
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
		if err := os.WriteFile(f.Path, []byte(f.Content), 0o644); err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
	}
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	return nil
}

// mountPrivate gives the node its file system: the host's, read-only, with private writable
// directories, a private /etc, and /proc and /sys of the node's own namespaces.
func mountPrivate() error {
	steps := []struct {
		what string
		do   func() error
	}{
		{"making mounts private", func() error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
		{"making the host file system read-only", func() error {
			return unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		}},
		{"private directories", mountTmpfs},
		{"private /etc", mountEtc},
		{"/proc", func() error {
			return unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"/sys", func() error {
			return unix.Mount("sysfs", "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

func mountTmpfs() error {
	for _, d := range privateDirs {
		if _, err := os.Stat(d.path); err != nil {
			continue // the host lacks it: nothing to hide
		}
		if err := unix.Mount("tmpfs", d.path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode="+d.mode); err != nil {
			return fmt.Errorf("%s: %w", d.path, err)
		}
	}
	return nil
}

// mountEtc lays a writable overlay on the host's /etc, its upper layer in the node's /run
// tmpfs: each node starts with the host's configuration and changes only its own copy.
func mountEtc() error {
	upper, work := "/run/.trellis/etc", "/run/.trellis/work"
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return unix.Mount("overlay", "/etc", "overlay", 0, "lowerdir=/etc,upperdir="+upper+",workdir="+work)
}

// reap waits for children forever, as PID 1 must: daemons started in the node are reparented
// here when their parent exits.
func reap() {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
		<-children
	}
}
