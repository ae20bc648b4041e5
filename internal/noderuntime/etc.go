package noderuntime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A node's /etc is an overlay: its lower layer is a copy of the host's /etc made once per
// network and trellis process (an "etc template"), its upper layer is in the node's /run.
// In the copy, a file owned by host uid U (and gid G) below UIDRange is owned by base+U (base+G),
// the network's uids, so that inside every node of the network it belongs to U as on the host
// (bird's files to bird, frr's to frr), with the host's modes. Only what is public is copied
// (copyTree): what any unprivileged host user may read, and the files a package installed that
// nobody changed since (/etc/frr/daemons, 0640 frr:frr, as Debian's frr ships it), whose
// contents anyone may download; /etc/shadow, keys, and what an administrator wrote for a
// service's eyes only are left out, whoever owns them. A node's root is an unprivileged uid on
// the host, and its /etc holds no host secret.
//
// The copy is a tmpfs of its own, mounted nowhere (fsopen, fsmount): only this process's
// descriptor and the overlays of the nodes started from it reach it, nothing of it is on disk,
// and the kernel frees it with the last of them, so that neither `down` nor a crash leaves it
// behind. (On a disk, as in /run/trellis on a host whose /run is not a tmpfs, making the
// 1300 inodes of a copy took 0.4 to 1.5 s of every `up`.)
//
// A node with its own root directory (`rootfs: DIR`) has DIR/etc as the lower layer instead,
// copied the same way (RootfsEtcTemplate), but whole: DIR is the user's, not the host's, and
// its files (its /etc/shadow, its daemons' keys) are the node's. An entry owned by a uid or gid
// beyond UIDRange (e.g. a tree unpacked by a user with subuids) is given to the node's root.

// EtcTemplate returns the path of the etc template of a network whose uids start at base, made
// from the host's /etc (src) unless this process has it already; the path stays valid until
// release is called, which the caller does once the node's overlay is mounted (node.Start).
func EtcTemplate(src string, base uint32) (path string, release func(), err error) {
	return template(src, base, false)
}

// RootfsEtcTemplate is EtcTemplate for the nodes whose root is rootfs: a copy of rootfs/etc.
func RootfsEtcTemplate(rootfs string, base uint32) (path string, release func(), err error) {
	src := filepath.Join(rootfs, "etc")
	if fi, err := os.Lstat(src); err != nil || !fi.IsDir() {
		return "", nil, fmt.Errorf("%w: %s is not a directory", ErrRootfs, src)
	}
	return template(src, base, true)
}

// ErrRootfs is returned when a node's root directory cannot serve.
var ErrRootfs = errors.New("node root directory")

// templates are the etc templates this process holds, by source and uid base.
var templates = struct {
	sync.Mutex
	m map[templateKey]*heldTemplate
}{m: map[templateKey]*heldTemplate{}}

type templateKey struct {
	src  string
	base uint32
}

type heldTemplate struct {
	root     *os.File // the tmpfs, mounted nowhere
	attached string   // where it is attached, on kernels that need it (etc_attached.go)
	users    int      // callers that have not released it
	used     time.Time
}

// templateIdle is how long a template nobody uses is kept for the next node of its network (a
// `trellis serve` applies many changes): then it is closed, and its nodes keep their copy.
const templateIdle = time.Minute

func template(src string, base uint32, whole bool) (string, func(), error) {
	templates.Lock() // the nodes of a network start in parallel: one copy is enough
	defer templates.Unlock()
	now := time.Now()
	for k, t := range templates.m {
		if t.users == 0 && now.Sub(t.used) > templateIdle {
			t.root.Close()
			delete(templates.m, k)
		}
	}
	k := templateKey{src, base}
	t := templates.m[k]
	if t == nil {
		root, err := memoryCopy(src, base, whole)
		if err != nil {
			return "", nil, fmt.Errorf("copy of %s for the nodes: %w", src, err)
		}
		t = &heldTemplate{root: root}
		if !detachedLower() {
			if t.attached, err = attachTemplate(root); err != nil {
				root.Close()
				return "", nil, err
			}
		}
		templates.m[k] = t
	}
	t.users++
	t.used = now
	release := sync.OnceFunc(func() {
		templates.Lock()
		defer templates.Unlock()
		t.users--
		t.used = time.Now()
		if t.users == 0 && t.attached != "" { // not kept attached for later nodes
			detachTemplate(t.attached)
			t.root.Close()
			delete(templates.m, k)
		}
	})
	if t.attached != "" {
		return t.attached, release, nil
	}
	// Another process (the spawner) opens it through this one's descriptor.
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), t.root.Fd()), release, nil
}

// memoryCopy copies src (whole, or what copyTree keeps of a host's /etc) into a new tmpfs
// mounted nowhere, made read-only once filled, and returns its root.
func memoryCopy(src string, base uint32, whole bool) (*os.File, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("tmpfs: %w", err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, fmt.Errorf("tmpfs: %w", err)
	}
	root := os.NewFile(uintptr(fd), src+" (copy)")
	err = copyTree(src, fmt.Sprintf("/proc/self/fd/%d", fd), base, whole)
	if err == nil {
		err = makeReadOnly(fd)
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// makeReadOnly makes the mount fd read-only. The kernel refuses (EBUSY) while a file of it is
// open for writing anywhere: a child that trellis forks at the same moment (a VM's QEMU, a
// helper) holds the copy's descriptors for the instant before its exec closes them. So it is
// tried again for up to a second.
func makeReadOnly(fd int) error {
	for try := 0; ; try++ {
		err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		if !errors.Is(err, unix.EBUSY) || try == 100 {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
