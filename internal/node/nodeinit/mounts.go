package nodeinit

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DefaultTmpfsSize is the size of each of a node's private directories when Config gives none
// (a node without a memory limit). Their pages count in the node's memory cgroup.
const DefaultTmpfsSize = 64 << 20

// PrivateDirs get an empty tmpfs of their own in every node; with /etc (an overlay, see
// EtcTemplate) they are the only writable places. /var/run is a link to /run on Debian.
var PrivateDirs = []struct {
	Path string
	Mode string
}{
	{"/run", "0755"}, {"/tmp", "1777"}, {"/var/tmp", "1777"}, {"/var/log", "0755"}, {"/var/lib", "0755"}, {"/dev/shm", "1777"},
}

// ReadyFile is the file, in a node's private /run, that marks the node as started: trellis
// writes into it once it has set the node up (package node, MarkReady). A node found without
// it was being started by a trellis that was killed, and is started again.
const ReadyFile = "/run/.trellis/ready"

// mountPrivate makes the node's file system, as host root on the setup thread, in its own
// mount namespace (spawnOne): the host's, read-only, with private writable directories
// owned by the node's root and a private /etc. The node's init gets a locked copy of it.
func mountPrivate(cfg Config) error {
	var etc *os.File
	steps := []struct {
		what string
		do   func() error
	}{
		{"making mounts private", func() error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
		{"making the host file system read-only", func() error {
			return unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		}},
		// /proc and /sys (not what is mounted below them) stay writable: trellis writes the
		// init's uid and gid maps in /proc, and the kernel lets the node mount a
		// /proc or /sys of its own (`ip netns exec` does) only where the host's mount it would
		// reveal is not locked read-only. Their files keep their host owners and modes.
		{"/proc and /sys", func() error {
			for _, p := range []string{"/proc", "/sys"} {
				if err := unix.MountSetattr(-1, p, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
			}
			return nil
		}},
		{"etc template " + cfg.Etc, func() (err error) {
			etc, err = os.OpenFile(cfg.Etc, unix.O_PATH|unix.O_DIRECTORY, 0) // /run/trellis goes under the node's /run
			return err
		}},
		{"private directories", func() error { return mountTmpfs(cfg.TmpfsSize, cfg.UIDBase) }},
		{"private /etc", func() error {
			defer etc.Close()
			return mountEtc(fmt.Sprintf("/proc/self/fd/%d", etc.Fd()), cfg.UIDBase)
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// mountTmpfs mounts the private directories, owned by the node's root (host uid base), and
// makes ReadyFile, owned by host root: the node cannot mark itself ready.
func mountTmpfs(size uint64, base uint32) error {
	if size == 0 {
		size = DefaultTmpfsSize
	}
	for _, d := range PrivateDirs {
		if _, err := os.Stat(d.Path); err != nil {
			continue // the host lacks it: nothing to hide
		}
		opts := fmt.Sprintf("mode=%s,size=%d,uid=%d,gid=%d", d.Mode, size, base, base)
		if err := unix.Mount("tmpfs", d.Path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("%s: %w", d.Path, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(ReadyFile), 0o755); err != nil {
		return err
	}
	return os.WriteFile(ReadyFile, nil, 0o600) // empty: not ready (MarkReady)
}

// mountEtc lays a writable overlay on the network's etc template (EtcTemplate), its upper
// layer in the node's /run tmpfs: each node starts with the host's configuration, owners
// mapped into the node, and changes only its own copy.
func mountEtc(lower string, base uint32) error {
	upper, work := "/run/.trellis/etc", "/run/.trellis/work"
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// The upper directory's mode and owner are /etc's: 0755, the node's root.
	if err := os.Chmod(upper, 0o755); err != nil {
		return err
	}
	if err := os.Chown(upper, int(base), int(base)); err != nil {
		return err
	}
	return unix.Mount("overlay", "/etc", "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work)
}
