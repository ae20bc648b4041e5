package image

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cavaliergopher/cpio"
)

// writeCpio writes the collection as a newc archive, which the kernel unpacks as the guest's
// root file system; directories come before what they hold.
func (c *collection) writeCpio(path string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := cpio.NewWriter(out)
	dirs := map[string]bool{}
	for p, e := range c.files {
		if e.dir {
			dirs[p] = true
		}
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range []string{"/proc", "/sys", "/dev", "/run", "/tmp", "/var", "/root", "/etc/bird"} {
		dirs[d] = true
	}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		h := &cpio.Header{Name: strings.TrimPrefix(d, "/"), Mode: cpio.TypeDir | 0o755}
		if e := c.files[d]; e != nil && e.dir { // a directory with its own owner and mode
			h.Mode, h.Uid, h.Guid = cpio.TypeDir|cpio.FileMode(e.mode), e.uid, e.gid
		}
		if err := w.WriteHeader(h); err != nil {
			return err
		}
	}
	paths := make([]string, 0, len(c.files))
	for p, e := range c.files {
		if !e.dir {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := c.files[p].writeTo(w); err != nil {
			out.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (e *entry) writeTo(w *cpio.Writer) error {
	name := strings.TrimPrefix(e.path, "/")
	if e.link != "" {
		// newc keeps a symlink's target as its content.
		if err := w.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeSymlink | 0o777, Size: int64(len(e.link))}); err != nil {
			return err
		}
		_, err := io.WriteString(w, e.link)
		return err
	}
	if e.from == "" {
		if err := w.WriteHeader(&cpio.Header{Name: name, Mode: cpio.FileMode(e.mode), Uid: e.uid, Guid: e.gid, Size: int64(len(e.content))}); err != nil {
			return err
		}
		_, err := io.WriteString(w, e.content)
		return err
	}
	f, err := os.Open(e.from)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := w.WriteHeader(&cpio.Header{Name: name, Mode: cpio.FileMode(e.mode), Uid: e.uid, Guid: e.gid, Size: st.Size()}); err != nil {
		return err
	}
	_, err = io.Copy(w, f)
	return err
}
