package image

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/guest"
)

// entry is one file of the initramfs: a copy of a host file, or literal content, or a symlink.
type entry struct {
	path    string // in the image
	from    string // host file to copy
	content string
	link    string // symlink target
	mode    os.FileMode
	uid     int // owner in the guest (0: root)
	gid     int
	dir     bool   // a directory with this mode and owner
	sum     string // sha256 of the content
}

type collection struct {
	files map[string]*entry
	// users and groups are the lines of /etc/passwd and /etc/group beyond root and nobody.
	users, groups []string
}

// libDirs are where the dynamic loader looks for libraries without a cache.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib"}

// collect lists the image's files: the agent as /init, the kernel's modules, the programs
// with their libraries, busybox's applets and a minimal /etc.
func collect(k Kernel, s Spec) (*collection, error) {
	c := &collection{files: map[string]*entry{}}
	if err := c.copy(guest.InitPath, s.Agent, 0o755); err != nil {
		return nil, err
	}
	if err := c.libraries(s.Agent); err != nil { // none for a static build
		return nil, err
	}
	for _, m := range k.Modules {
		if err := c.copy(filepath.Join("/lib/modules", k.Release, m), filepath.Join(k.Dir, "modules", m), 0o644); err != nil {
			return nil, err
		}
	}
	c.add(&entry{path: guest.ModuleOrder, content: strings.Join(k.Modules, "\n") + "\n", mode: 0o644})
	for _, p := range s.Programs {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := c.program(p); err != nil {
			return nil, err
		}
	}
	if _, ok := c.files["/usr/bin/bash"]; ok {
		// bash, not busybox's shell, which would run its own applets (e.g. its small ip)
		// instead of the programs the image carries.
		c.add(&entry{path: "/bin/sh", link: "/usr/bin/bash"})
		c.add(&entry{path: "/bin/bash", link: "/usr/bin/bash"})
	}
	if s.FRR {
		if err := c.frr(); err != nil {
			return nil, err
		}
	}
	if err := c.applets(); err != nil {
		return nil, err
	}
	passwd := append([]string{"root:x:0:0:root:/root:/bin/sh", "nobody:x:65534:65534:nobody:/nonexistent:/bin/false"}, c.users...)
	group := append([]string{"root:x:0:", "nogroup:x:65534:"}, c.groups...)
	c.add(&entry{path: "/etc/passwd", content: strings.Join(passwd, "\n") + "\n", mode: 0o644})
	c.add(&entry{path: "/etc/group", content: strings.Join(group, "\n") + "\n", mode: 0o644})
	c.add(&entry{path: "/etc/shadow", content: shadow(passwd), mode: 0o600})
	c.add(&entry{path: "/etc/hosts", content: "127.0.0.1 localhost\n::1 localhost\n", mode: 0o644})
	return c, nil
}

// shadow is /etc/shadow for the passwd lines: every account locked (no password logs in), its
// password never expiring, so that PAM's account checks (vtysh's) pass as on the host.
func shadow(passwd []string) string {
	var b strings.Builder
	for _, line := range passwd {
		name, _, _ := strings.Cut(line, ":")
		b.WriteString(name + ":*:::::::\n")
	}
	return b.String()
}

func (c *collection) add(e *entry) {
	if e.sum == "" {
		h := sha256.Sum256([]byte(e.content + "\x00" + e.link))
		e.sum = hex.EncodeToString(h[:])
	}
	c.files[e.path] = e
}

// copy adds host file from at path, following symlinks.
func (c *collection) copy(path, from string, mode os.FileMode) error {
	_, err := c.copyEntry(path, from, mode)
	return err
}

// copyEntry is copy, returning the entry (nil if path was there already).
func (c *collection) copyEntry(path, from string, mode os.FileMode) (*entry, error) {
	if _, ok := c.files[path]; ok {
		return nil, nil
	}
	f, err := os.Open(from)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	e := &entry{path: path, from: from, mode: mode, sum: hex.EncodeToString(h.Sum(nil))}
	c.add(e)
	return e, nil
}

// program adds an executable and, for a dynamic one, its loader and libraries.
func (c *collection) program(path string) error {
	if err := c.copy(path, path, 0o755); err != nil {
		return err
	}
	return c.libraries(path)
}

func (c *collection) libraries(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("image: %s: %w", path, err)
	}
	defer f.Close()
	dirs := libDirs
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} { // e.g. FRR's own libraries
		rpaths, _ := f.DynString(tag)
		for _, rp := range rpaths {
			for _, d := range strings.Split(rp, ":") {
				dirs = append([]string{strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(path))}, dirs...)
			}
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			data, _ := io.ReadAll(p.Open())
			interp := strings.TrimRight(string(data), "\x00")
			if err := c.copy(interp, interp, 0o755); err != nil {
				return err
			}
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("image: %s: %w", path, err)
	}
	for _, lib := range libs {
		found := ""
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
				found = filepath.Join(d, lib)
				break
			}
		}
		if found == "" {
			return fmt.Errorf("image: %s needs %s, which is not in %s", path, lib, strings.Join(dirs, ", "))
		}
		if _, ok := c.files[found]; ok {
			continue
		}
		if err := c.copy(found, found, 0o755); err != nil {
			return err
		}
		if err := c.libraries(found); err != nil {
			return err
		}
	}
	return nil
}

// applets links busybox's applets in /bin where no program of that name was copied.
func (c *collection) applets() error {
	if _, ok := c.files["/usr/bin/busybox"]; !ok {
		return fmt.Errorf("image: busybox is missing; install busybox-static")
	}
	out, err := exec.Command("/usr/bin/busybox", "--list").Output()
	if err != nil {
		return fmt.Errorf("image: busybox --list: %w", err)
	}
	taken := map[string]bool{}
	for p := range c.files {
		taken[filepath.Base(p)] = true
	}
	for _, name := range strings.Fields(string(out)) {
		if !taken[name] {
			c.add(&entry{path: "/bin/" + name, link: "/usr/bin/busybox"})
		}
	}
	return nil
}

// id names the image by its content.
func (c *collection) id() string {
	paths := make([]string, 0, len(c.files))
	for p := range c.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		e := c.files[p]
		fmt.Fprintf(h, "%s %o %d:%d %v %s\n", p, e.mode, e.uid, e.gid, e.dir, e.sum)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// write makes the image in dir: the kernel, the initramfs and image.json, atomically.
func write(cache, dir, id string, k Kernel, c *collection) (Image, error) {
	tmp, err := os.MkdirTemp(filepath.Join(cache, "images"), ".build-")
	if err != nil {
		if err := os.MkdirAll(filepath.Join(cache, "images"), 0o755); err != nil {
			return Image{}, err
		}
		if tmp, err = os.MkdirTemp(filepath.Join(cache, "images"), ".build-"); err != nil {
			return Image{}, err
		}
	}
	defer os.RemoveAll(tmp)
	if err := copyFile(filepath.Join(k.Dir, "vmlinuz"), filepath.Join(tmp, "vmlinuz")); err != nil {
		return Image{}, err
	}
	if err := c.writeCpio(filepath.Join(tmp, "initrd")); err != nil {
		return Image{}, err
	}
	img := Image{ID: id, Release: k.Release, Built: time.Now().UTC()}
	for _, f := range []string{"vmlinuz", "initrd"} {
		if st, err := os.Stat(filepath.Join(tmp, f)); err == nil {
			img.Size += st.Size()
		}
	}
	for _, e := range c.files {
		if e.from != "" {
			img.Inputs = append(img.Inputs, e.from+" "+e.sum[:12])
		}
	}
	sort.Strings(img.Inputs)
	data, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return Image{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "image.json"), data, 0o644); err != nil {
		return Image{}, err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return Image{}, err
	}
	return load(dir)
}
