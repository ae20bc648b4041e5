package guest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// boot mounts the guest's file systems and loads the image's kernel modules.
func boot() error {
	mounts := []struct{ fs, dir, opts string }{
		{"proc", "/proc", ""},
		{"sysfs", "/sys", ""},
		{"devtmpfs", "/dev", "mode=0755"},
		{"tmpfs", "/run", "mode=0755"},
		{"tmpfs", "/tmp", "mode=1777"},
		{"tmpfs", "/var", "mode=0755"},
	}
	// The initramfs is unpacked into the root, a tmpfs the kernel sizes at a share of the
	// guest's memory that the image (the agent, libraries, modules) nearly fills in a 320M
	// guest: files: then had no room. It may use most of the memory instead, as /run, /tmp and
	// /var may. A root that is not a tmpfs (no size to change) is left as it is.
	_ = unix.Mount("rootfs", "/", "", unix.MS_REMOUNT, "size=90%")
	for _, m := range mounts {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fs, m.dir, m.fs, 0, m.opts); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s: %w", m.dir, err)
		}
	}
	// Not /run/frr: FRR makes it for its user (frrinit.sh, or the daemons themselves), as in a
	// container node, whose /run starts empty.
	for _, d := range []string{"/dev/pts", "/var/log", "/var/lib", "/var/tmp", "/run/bird"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", 0, "newinstance,ptmxmode=0666"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := os.Symlink("/run", "/var/run"); err != nil && !os.IsExist(err) {
		return err
	}
	return loadModules()
}

// loadModules loads the modules ModuleOrder lists, in order; one already loaded is fine.
func loadModules() error {
	f, err := os.Open(ModuleOrder)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	defer f.Close()
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return err
	}
	dir := filepath.Join("/lib/modules", unix.ByteSliceToString(uts.Release[:]))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rel := strings.TrimSpace(sc.Text())
		if rel == "" {
			continue
		}
		if err := loadModule(filepath.Join(dir, rel)); err != nil {
			return err
		}
	}
	return sc.Err()
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("module: %w", err)
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && err != unix.EEXIST {
		return fmt.Errorf("module %s: %w", filepath.Base(path), err)
	}
	return nil
}

// openPort waits for the virtio-serial port named name and opens it.
func openPort(name string, timeout time.Duration) (*os.File, error) {
	deadline := time.Now().Add(timeout)
	for {
		names, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, n := range names {
			data, err := os.ReadFile(n)
			if err == nil && strings.TrimSpace(string(data)) == name {
				dev := "/dev/" + filepath.Base(filepath.Dir(n))
				if f, err := os.OpenFile(dev, os.O_RDWR, 0); err == nil {
					return f, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no virtio-serial port %s after %s", name, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cmdline returns the value of key=value on the kernel's command line.
func cmdline(key string) string {
	data, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(data)) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}
