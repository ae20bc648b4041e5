package nodeinit

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ReadyFile is the file, in a node's private /run, that marks the node as started: trellis
// writes into it once it has set the node up (package node, MarkReady). A node found without
// it was being started by a trellis that was killed, and is started again.
const ReadyFile = "/run/.trellis/ready"

// emptyDir is an empty directory of host root's in a node's /run, bound read-only over the
// masked directories of its /proc (proc.go): a bind, not an empty tmpfs of its own, because
// every superblock a node mounts costs memory in every memory cgroup of the machine (the
// kernel's per-cgroup shrinker info: docs/benchmarks.md, deploy notes).
const emptyDir = "/run/.trellis/empty"

// mountPrivate makes the node's file system, as host root on the setup thread, in a copy of
// the base tree (base.go; spawnOne), or of the host's for a node with cfg.Rootfs: the host's,
// read-only, with private writable directories owned by the node's root (privatefs.go), a
// private /etc and a /dev of its own (dev.go); or, with cfg.Rootfs, that directory as its
// root (rootfs.go). The node's init gets a locked copy of it.
func mountPrivate(cfg Config) error {
	var etc *os.File
	var fs *privateFS
	root := "/"
	var steps []step
	if cfg.Rootfs != "" {
		root = cfg.Rootfs
		steps = append(steps, step{"root file system " + cfg.Rootfs, func() error { return bindRoot(cfg.Rootfs) }},
			// As the base tree's: /proc and /sys stay writable at the mount level.
			step{"/proc and /sys", func() error {
				for _, p := range []string{"/proc", "/sys"} {
					if err := unix.MountSetattr(-1, filepath.Join(root, p), 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
						return fmt.Errorf("%s: %w", p, err)
					}
				}
				return nil
			}})
	}
	steps = append(steps,
		step{"etc template " + cfg.Etc, func() (err error) {
			// A tmpfs mounted nowhere, through trellis's descriptor (node.EtcTemplate).
			etc, err = os.OpenFile(cfg.Etc, unix.O_PATH|unix.O_DIRECTORY, 0)
			return err
		}},
		step{"private file system", func() (err error) {
			fs, err = newPrivateFS(cfg.TmpfsSize, cfg.UIDBase)
			return err
		}},
		step{"private file system attached", func() error { return fs.attach(root) }},
		step{"private /dev", func() error { return mountDev(root, fs, cfg.UIDBase) }},
		step{"private directories", func() error { return fs.mountDirs(root) }},
		step{"private /etc", func() error {
			defer etc.Close()
			return mountEtc(root, fmt.Sprintf("/proc/self/fd/%d", etc.Fd()), cfg.UIDBase)
		}},
	)
	if cfg.Rootfs != "" {
		steps = append(steps, step{"changing root to " + cfg.Rootfs, func() error { return pivot(cfg.Rootfs) }})
	}
	defer func() {
		if fs != nil {
			fs.close() // mounted at its places, or not at all
		}
	}()
	for _, s := range steps {
		if err := s.do(); err != nil {
			if etc != nil {
				etc.Close()
			}
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// step is one step of mountPrivate.
type step struct {
	what string
	do   func() error
}

// mountEtc lays a writable overlay on the network's etc template (EtcTemplate), its upper
// layer in the node's /run tmpfs: each node starts with the host's configuration, owners
// mapped into the node, and changes only its own copy.
func mountEtc(root, lower string, base uint32) error {
	upper, work := filepath.Join(root, "/run/.trellis/etc"), filepath.Join(root, "/run/.trellis/work")
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
	target, done, err := mountPoint(root, "/etc")
	if err != nil {
		return err
	}
	defer done()
	return unix.Mount("overlay", target, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work)
}
