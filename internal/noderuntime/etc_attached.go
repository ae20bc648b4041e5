package noderuntime

// Kernels before 6.15 refuse an overlay whose lower layer is a mount attached nowhere (overlayfs
// clones its layers with clone_private_mount, which took only mounts of the caller's own mount
// namespace until "fs: allow detached mounts in clone_private_mount()"): Debian 12's 6.1 among
// them. There the etc template is attached at a directory of TemplateDir, root's alone (0700),
// for as long as nodes are being started from it, and detached again when the last of them has
// its /etc; a template left by a trellis that was killed is detached by the next one.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// TemplateDir is where etc templates are attached on kernels that need it.
var TemplateDir = "/run/trellis/etc"

var attachSeq atomic.Uint64

// detachedLower tells whether this kernel takes a mount attached nowhere as an overlay's lower
// layer: Linux 6.15 or later (known from the release, not tried: a failed overlay mount logs
// "failed to clone lowerpath" in the kernel's log).
func detachedLower() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return releaseAtLeast(unix.ByteSliceToString(u.Release[:]), 6, 15)
}

// releaseAtLeast tells whether a kernel release ("6.1.0-56-amd64") is major.minor or later.
func releaseAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(release, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// attachTemplate attaches the template's mount (root) at a new directory of TemplateDir, named
// after this process, and returns its path.
func attachTemplate(root *os.File) (string, error) {
	sweepTemplates()
	if err := os.MkdirAll(TemplateDir, 0o700); err != nil {
		return "", err
	}
	dir := filepath.Join(TemplateDir, fmt.Sprintf("%d.%d", os.Getpid(), attachSeq.Add(1)))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	if err := unix.MoveMount(int(root.Fd()), "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("attaching the etc template at %s: %w", dir, err)
	}
	return dir, nil
}

// detachTemplate undoes attachTemplate.
func detachTemplate(dir string) {
	unix.Unmount(dir, unix.MNT_DETACH)
	os.Remove(dir)
}

// sweepTemplates detaches the templates of trellis processes that are gone.
func sweepTemplates() {
	entries, _ := os.ReadDir(TemplateDir)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.SplitN(e.Name(), ".", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if unix.Kill(pid, 0) == unix.ESRCH {
			detachTemplate(filepath.Join(TemplateDir, e.Name()))
		}
	}
}
