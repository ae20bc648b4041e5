package nodeinit

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// masked are the paths of the node's /proc that are hidden (/dev/null mounted read-only and
// nodev over a file, an empty read-only directory, emptyDir, over a directory), as container runtimes do: they
// describe or act on the whole machine. Most are refused to a node's root anyway (its user namespace does not own the
// host); masking makes them not even readable.
var masked = []string{
	"/proc/kcore", "/proc/kmsg", "/proc/sysrq-trigger", "/proc/timer_list", "/proc/keys",
	"/proc/latency_stats", "/proc/sched_debug", "/proc/acpi", "/proc/scsi", "/proc/sys/kernel/sysrq",
}

// readOnly are the paths of /proc that stay readable but not writable: host-wide settings.
// /proc/sys/net is the node's own network namespace's, and stays writable.
var readOnly = []string{"/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq"}

// mountProcSys mounts, in the node's init, the node's /proc (of its PID namespace) and /sys (of
// its network namespace).
func mountProcSys() error {
	if err := mountProc(); err != nil {
		return fmt.Errorf("/proc: %w", err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("/sys: %w", err)
	}
	return nil
}

// mountProc mounts the node's /proc (of its PID namespace), masks what describes or acts on
// the whole machine, and makes the host-wide settings read-only, all but /proc/sys/net.
func mountProc() error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	for _, p := range masked {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			continue // this kernel lacks it
		case fi.IsDir():
			err = unix.Mount(emptyDir, p, "", unix.MS_BIND, "")
			if err == nil {
				err = unix.MountSetattr(-1, p, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC})
			}
		default: // nodev: opening it fails, as opening the file itself does (on 6.1 the
			// bound /dev/null did not inherit /proc's nodev, and a write to it succeeded)
			err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
			if err == nil {
				err = unix.MountSetattr(-1, p, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV})
			}
		}
		if err != nil {
			return fmt.Errorf("masking %s: %w", p, err)
		}
	}
	// /proc/sys/net is bound on itself first, so that the read-only /proc/sys above it (bound
	// recursively, made read-only alone) keeps it as a writable mount.
	for _, p := range append([]string{"/proc/sys/net"}, readOnly...) {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if p == "/proc/sys/net" {
			continue
		}
		if err := unix.MountSetattr(-1, p, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("%s read-only: %w", p, err)
		}
	}
	return nil
}
