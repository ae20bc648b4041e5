package oci

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// ErrDigest is returned when an image's config or a layer is not what its digest says.
var ErrDigest = errors.New("digest mismatch")

// ErrLayer is returned for a layer that cannot be unpacked (corrupt, or an entry that would
// leave the root).
var ErrLayer = errors.New("bad layer")

// unpack applies img's layers in order into the empty directory dst. Each layer's
// uncompressed stream is checked against the config's diff_id for it (and the config against
// the manifest's digest of it): a mismatch fails, and the caller removes dst.
func unpack(ctx context.Context, img v1.Image, dst string) (*v1.ConfigFile, error) {
	cfg, err := verifiedConfig(img)
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return nil, fmt.Errorf("%w: %d layers, %d diff_ids in the config", ErrLayer, len(layers), len(cfg.RootFS.DiffIDs))
	}
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		err = applyVerified(rc, dst, cfg.RootFS.DiffIDs[i])
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i, cfg.RootFS.DiffIDs[i], err)
		}
	}
	return cfg, nil
}

// verifiedConfig returns img's config once its bytes match the manifest's digest of them.
func verifiedConfig(img v1.Image) (*v1.ConfigFile, error) {
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	want, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(raw); want.Algorithm != "sha256" || hex.EncodeToString(got[:]) != want.Hex {
		return nil, fmt.Errorf("config: %w: the manifest says %s", ErrDigest, want)
	}
	return v1.ParseConfigFile(strings.NewReader(string(raw)))
}

// applyVerified applies one layer's tar stream to dst and checks the stream's sha256.
func applyVerified(r io.Reader, dst string, diffID v1.Hash) error {
	h := sha256.New()
	tr := io.TeeReader(r, h)
	if err := apply(tar.NewReader(tr), dst); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, tr); err != nil { // the tar's end padding
		return err
	}
	return checkSum(h, diffID)
}

func checkSum(h hash.Hash, want v1.Hash) error {
	if got := hex.EncodeToString(h.Sum(nil)); want.Algorithm != "sha256" || got != want.Hex {
		return fmt.Errorf("%w: its content is sha256:%s", ErrDigest, got)
	}
	return nil
}

// layer applies the entries of one layer to root, as OCI's image-layer spec says: a whiteout
// (.wh.NAME) removes NAME of the layers below, an opaque whiteout (.wh..wh..opq) empties its
// directory of them, and every other entry replaces what was at its path. Paths are resolved
// inside root (symbolic links too): no entry can write outside it.
type layer struct {
	root  string
	rfd   int
	added map[string]bool // paths this layer made: an opaque whiteout leaves them
}

func apply(tr *tar.Reader, root string) error {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	l := &layer{root: root, rfd: rfd, added: map[string]bool{}}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrLayer, err)
		}
		if err := l.entry(tr, hdr); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
}

func (l *layer) entry(tr *tar.Reader, hdr *tar.Header) error {
	rel := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
	if rel == "" {
		return nil // the root itself keeps trellis's owner and mode
	}
	dir, base := path.Split(rel)
	switch {
	case base == ".wh..wh..opq":
		return l.opaque(dir)
	case strings.HasPrefix(base, ".wh."):
		parent, err := l.resolve(dir, false)
		if err != nil || parent == "" {
			return err
		}
		return os.RemoveAll(filepath.Join(parent, strings.TrimPrefix(base, ".wh.")))
	}
	parent, err := l.resolve(dir, true)
	if err != nil {
		return err
	}
	target := filepath.Join(parent, base)
	l.added[rel] = true
	if hdr.Typeflag == tar.TypeDir {
		if fi, err := os.Lstat(target); err == nil && fi.IsDir() {
			return setMeta(target, hdr)
		}
	}
	if err := os.RemoveAll(target); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = os.Mkdir(target, 0o700)
	case tar.TypeReg, tar.TypeRegA:
		err = writeFile(target, tr)
	case tar.TypeSymlink:
		err = os.Symlink(hdr.Linkname, target)
	case tar.TypeLink:
		return l.link(hdr.Linkname, target)
	case tar.TypeFifo:
		err = unix.Mkfifo(target, 0o600)
	default:
		return nil // devices (the node's /dev is its own, and its root nodev) and the rest
	}
	if err != nil {
		return err
	}
	return setMeta(target, hdr)
}

// link makes target a hard link to the entry an earlier one made at name (in this layer or
// below), never following a symbolic link as the last component.
func (l *layer) link(name, target string) error {
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	dir, base := path.Split(rel)
	parent, err := l.resolve(dir, false)
	if err != nil || parent == "" || base == "" {
		return fmt.Errorf("%w: hard link to %s, which no earlier entry made", ErrLayer, name)
	}
	if err := os.Link(filepath.Join(parent, base), target); err != nil {
		return fmt.Errorf("%w: hard link to %s: %v", ErrLayer, name, err)
	}
	return nil
}

// opaque removes what the layers below put in dir, keeping what this layer added.
func (l *layer) opaque(dir string) error {
	parent, err := l.resolve(dir, true)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !l.added[path.Join(dir, e.Name())] {
			if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolve returns the host path of directory dir (relative to the root), its symbolic links
// resolved inside the root; with create, missing directories are made (0755, root's);
// without, a missing one gives "".
func (l *layer) resolve(dir string, create bool) (string, error) {
	dir = strings.Trim(dir, "/")
	if dir == "" {
		return l.root, nil
	}
	fd, err := unix.Openat2(l.rfd, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if errors.Is(err, unix.ENOENT) {
		if !create {
			return "", nil
		}
		parent, base := path.Split(dir)
		p, err := l.resolve(parent, true)
		if err != nil {
			return "", err
		}
		if err := os.Mkdir(filepath.Join(p, base), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
		if p, err = l.resolve(dir, false); p == "" && err == nil {
			err = fmt.Errorf("%w: directory %s cannot be made (a symbolic link to nowhere?)", ErrLayer, dir)
		}
		return p, err
	}
	if err != nil {
		return "", fmt.Errorf("%w: directory %s: %v", ErrLayer, dir, err)
	}
	defer unix.Close(fd)
	return os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
}

func writeFile(target string, r io.Reader) error {
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// setMeta gives target the entry's owner (the image's uid and gid, as for `rootfs:`: a
// node's root sees them as host ids), mode and modification time.
func setMeta(target string, hdr *tar.Header) error {
	if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeSymlink {
		// after the chown, which clears set-user-ID bits
		if err := unix.Fchmodat(unix.AT_FDCWD, target, uint32(hdr.Mode)&0o7777, 0); err != nil {
			return err
		}
	}
	if hdr.Typeflag == tar.TypeDir {
		return nil // its children change it
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, target, ts, unix.AT_SYMLINK_NOFOLLOW)
}
