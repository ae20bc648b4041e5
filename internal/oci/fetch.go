package oci

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/spec"
	"golang.org/x/sys/unix"
)

// MirrorsEnv names the environment variable from which the command line takes Store.Mirrors
// (host[:port], comma separated).
const MirrorsEnv = "TRELLIS_REGISTRY_MIRRORS"

func normalise(ref string) string {
	if r, err := name.ParseReference(ref); err == nil {
		return r.Name()
	}
	return ref
}

// Get returns the image ref names, from the cache if it has an image of that reference (an
// import, or an earlier pull), else pulled from its registry and unpacked. The image is held
// (hold.go) for the rest of the process's life.
func (s Store) Get(ctx context.Context, ref string, log *slog.Logger) (Image, error) {
	if img, err := s.Find(ref); err == nil {
		return img, s.hold(img)
	}
	return s.Pull(ctx, ref, log)
}

// Pull fetches image ref from its registry (with the credentials of the docker config file,
// $DOCKER_CONFIG/config.json or ~/.docker/config.json) and unpacks it unless the cache has its
// config digest already; ref then names it. It logs where it pulls from to log (nil: nowhere).
func (s Store) Pull(ctx context.Context, ref string, log *slog.Logger) (Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w", ref, err)
	}
	var img v1.Image
	for _, try := range candidates(r, s.Mirrors) {
		if img, err = remote.Image(try, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
			remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH})); err == nil {
			logline.OrDiscard(log).Info(fmt.Sprintf("image %s: pulling from %s", ref, try.Context().RegistryStr()), "image", ref)
			break
		}
	}
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w: %v (check the name and tag, that the registry is reachable, and for a private image `docker login`)", ref, ErrNoImage, err)
	}
	got, err := s.add(ctx, img, r.Name())
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w", ref, err)
	}
	return got, nil
}

// candidates are where ref is looked for: the mirrors first for a Docker Hub image.
func candidates(r name.Reference, mirrors []string) []name.Reference {
	out := []name.Reference{}
	if r.Context().RegistryStr() == name.DefaultRegistry {
		for _, m := range mirrors {
			if m = strings.TrimSpace(m); m == "" {
				continue
			}
			if mr, err := name.ParseReference(m + "/" + r.Context().RepositoryStr() + sep(r) + r.Identifier()); err == nil {
				out = append(out, mr)
			}
		}
	}
	return append(out, r)
}

func sep(r name.Reference) string {
	if _, ok := r.(name.Digest); ok {
		return "@"
	}
	return ":"
}

// add unpacks img into the cache unless it is there already, and records ref (if any) as its
// name, taking it from any other image.
func (s Store) add(ctx context.Context, img v1.Image, ref string) (Image, error) {
	id, err := img.ConfigName()
	if err != nil {
		return Image{}, err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return Image{}, err
	}
	unlock, err := s.lock()
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	dir := filepath.Join(s.Dir, id.Hex)
	got, err := load(dir)
	if err != nil {
		if got, err = s.unpackNew(ctx, img, dir); err != nil {
			return Image{}, err
		}
	}
	if ref != "" {
		if err := s.name(&got, ref); err != nil {
			return Image{}, err
		}
	}
	return got, s.hold(got)
}

// unpackNew unpacks img into a temporary directory, then renames it to dir: a failure or a
// kill leaves no image (a left temporary directory is removed by prune).
func (s Store) unpackNew(ctx context.Context, img v1.Image, dir string) (Image, error) {
	tmp, err := os.MkdirTemp(s.Dir, ".unpack-")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Image{}, err
	}
	root := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		return Image{}, err
	}
	start := time.Now()
	cfg, err := unpack(ctx, img, root)
	if err != nil {
		return Image{}, err
	}
	for _, d := range spec.RootfsDirs { // where trellis mounts the node's own: never in the image's layers' way
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return Image{}, fmt.Errorf("the image's /%s: %w", d, err)
		}
	}
	got := Image{ID: filepath.Base(dir), Config: cfg.Config, Unpacked: time.Now(), Took: time.Since(start), Dir: tmp}
	got.Size = diskUsage(root)
	if err := got.save(); err != nil {
		return Image{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Image{}, err
	}
	got.Dir = dir
	return got, nil
}

// name makes ref name img, and no other image.
func (s Store) name(img *Image, ref string) error {
	imgs, err := s.List()
	if err != nil {
		return err
	}
	for _, o := range imgs {
		if o.ID == img.ID {
			continue
		}
		if kept := without(o.Refs, ref); len(kept) != len(o.Refs) {
			o.Refs = kept
			if err := o.save(); err != nil {
				return err
			}
		}
	}
	img.Refs = append(without(img.Refs, ref), ref)
	return img.save()
}

func without(refs []string, ref string) []string {
	var out []string
	for _, r := range refs {
		if r != ref {
			out = append(out, r)
		}
	}
	return out
}

// lock serialises changes to the store between trellis processes.
func (s Store) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// diskUsage is the space the files under dir take (blocks, each inode once).
func diskUsage(dir string) int64 {
	seen := map[uint64]bool{}
	var total int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		var st unix.Stat_t
		if err == nil && unix.Lstat(p, &st) == nil && !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}
