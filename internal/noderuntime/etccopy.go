package noderuntime

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/trellisnet/trellis/internal/pkgfiles"
)

// copyTree copies src to dst, owners shifted by base, modes kept. With whole (a rootfs's /etc)
// it copies everything, owners beyond UIDRange given to the node's root. Otherwise src is a
// host's /etc, and an entry is copied if it is public:
//   - any unprivileged user may read it: a file or link readable by others (o+r), or a
//     directory they may list and enter (o+rx), in directories they may list and enter all the
//     way from src;
//   - or it is a file a package installed that nobody changed since: its MD5 is the one dpkg
//     recorded among the package's conffiles, or ucf for a file it manages (pkgfiles);
//     its contents are the package's, which anyone may download;
//   - or it is a directory on the way to one of those (/etc/frr, 0750 frr:frr), with its own
//     owner and mode and only the entries copied;
//
// and its owner and group are uids the node maps (below UIDRange). Devices, sockets and pipes
// are never copied. A file is judged on the descriptor its contents are read from, so that a
// file changed meanwhile is judged as it is copied.
func copyTree(src, dst string, base uint32, whole bool) error {
	c := &copier{src: src, dst: dst, base: base, whole: whole, dirs: map[string]*dirEntry{}}
	if !whole {
		var err error
		if c.pristine, err = pkgfiles.Read(); err != nil {
			return err
		}
	}
	return filepath.WalkDir(src, c.visit)
}

type copier struct {
	src, dst string
	base     uint32
	whole    bool
	pristine pkgfiles.Sums        // the packages' files in a host's /etc
	dirs     map[string]*dirEntry // the directories seen, by path below src
}

type dirEntry struct {
	fi       fs.FileInfo
	uid, gid uint32
	open     bool // others may list and enter it and every directory above it
	made     bool // in the copy
}

func (c *copier) visit(path string, d fs.DirEntry, err error) error {
	if err != nil {
		if path != c.src && errors.Is(err, fs.ErrPermission) {
			return nil
		}
		return err
	}
	rel, _ := filepath.Rel(c.src, path)
	fi, err := os.Lstat(path)
	if err != nil {
		return nil // gone meanwhile
	}
	if d.IsDir() {
		return c.dir(rel, fi)
	}
	parent := c.dirs[filepath.Dir(rel)]
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return c.symlink(path, rel, fi, parent)
	case fi.Mode().IsRegular():
		return c.regular(path, rel, parent)
	}
	return nil
}

// dir notes a directory, and makes it in the copy if it is copied whatever it holds; a
// directory whose owner the node does not map is left out with all it holds.
func (c *copier) dir(rel string, fi fs.FileInfo) error {
	uid, gid, ok := c.owners(fi)
	if !ok {
		return filepath.SkipDir
	}
	e := &dirEntry{fi: fi, uid: uid, gid: gid, open: others(fi, 0o005)}
	if rel != "." {
		e.open = e.open && c.dirs[filepath.Dir(rel)].open
	}
	c.dirs[rel] = e
	if rel == "." || c.whole || e.open {
		return c.makeDir(rel)
	}
	return nil // made with the first entry copied into it
}

// makeDir makes directory rel, and those above it, in the copy.
func (c *copier) makeDir(rel string) error {
	e := c.dirs[rel]
	if e.made {
		return nil
	}
	to := filepath.Join(c.dst, rel)
	chown := os.Lchown
	if rel == "." {
		chown = os.Chown // dst, the copy's root, is there; it may be a link to it (/proc/self/fd/N)
	} else {
		if err := c.makeDir(filepath.Dir(rel)); err != nil {
			return err
		}
		if err := os.Mkdir(to, 0o700); err != nil {
			return err
		}
	}
	if err := chown(to, int(c.base+e.uid), int(c.base+e.gid)); err != nil {
		return err
	}
	e.made = true
	return os.Chmod(to, e.fi.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky))
}

func (c *copier) symlink(path, rel string, fi fs.FileInfo, parent *dirEntry) error {
	uid, gid, ok := c.owners(fi)
	if !ok || !c.whole && !parent.open {
		return nil
	}
	target, err := os.Readlink(path)
	if err != nil {
		return nil
	}
	if err := c.makeDir(filepath.Dir(rel)); err != nil {
		return err
	}
	to := filepath.Join(c.dst, rel)
	if err := os.Symlink(target, to); err != nil {
		return err
	}
	return os.Lchown(to, int(c.base+uid), int(c.base+gid))
}

// regular copies a regular file if it is copied, judged on the descriptor it is read from.
func (c *copier) regular(path, rel string, parent *dirEntry) error {
	in, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil // gone, or replaced by a link: left out
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	uid, gid, ok := c.owners(fi)
	if !ok {
		return nil
	}
	var contents io.Reader = in
	if !c.whole && !(parent.open && others(fi, 0o004)) {
		if _, listed := c.pristine[path]; !listed {
			return nil
		}
		data, err := io.ReadAll(in)
		if err != nil {
			return err
		}
		if !c.pristine.Unchanged(path, data) {
			return nil // changed since its package installed it
		}
		contents = bytes.NewReader(data)
	}
	if err := c.makeDir(filepath.Dir(rel)); err != nil {
		return err
	}
	to := filepath.Join(c.dst, rel)
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, contents); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Lchown(to, int(c.base+uid), int(c.base+gid)); err != nil {
		return err
	}
	return os.Chmod(to, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}

// owners returns the owner and group of an entry in the node, and whether it is copied as far
// as they go: in a host's /etc, only entries whose owners the node maps.
func (c *copier) owners(fi fs.FileInfo) (uid, gid uint32, ok bool) {
	st := fi.Sys().(*syscall.Stat_t)
	uid, gid = st.Uid, st.Gid
	if c.whole {
		if uid >= UIDRange {
			uid = 0
		}
		if gid >= UIDRange {
			gid = 0
		}
		return uid, gid, true
	}
	return uid, gid, uid < UIDRange && gid < UIDRange
}

// others says whether the permission bits for others include bits.
func others(fi fs.FileInfo, bits fs.FileMode) bool {
	return fi.Mode().Perm()&bits == bits
}
