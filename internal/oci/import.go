package oci

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ErrFormat is returned for a file that is neither a `docker save` archive, an OCI archive nor
// an OCI layout directory.
var ErrFormat = errors.New("not an image archive or OCI layout")

// Import unpacks the images of a `docker save` archive (its repository tags name them), an
// OCI archive or an OCI layout directory (their org.opencontainers.image.ref.name annotations
// name them; an image with none is known by its ID).
func (s Store) Import(ctx context.Context, file string) ([]Image, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return s.importLayout(ctx, file)
	}
	names, err := tarNames(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", file, ErrFormat, err)
	}
	switch {
	case names["manifest.json"]:
		return s.importDockerSave(ctx, file)
	case names["oci-layout"] && names["index.json"]:
		dir, err := os.MkdirTemp(s.Dir, ".import-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := extractLayout(file, dir); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return s.importLayout(ctx, dir)
	}
	return nil, fmt.Errorf("%s: %w: it has neither manifest.json (docker save) nor oci-layout and index.json", file, ErrFormat)
}

func (s Store) importDockerSave(ctx context.Context, file string) ([]Image, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(file) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []Image
	for _, d := range m {
		var tag *name.Tag
		if len(d.RepoTags) > 0 {
			t, err := name.NewTag(d.RepoTags[0])
			if err != nil {
				return nil, fmt.Errorf("%s: tag %q: %w", file, d.RepoTags[0], err)
			}
			tag = &t
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		got, err := s.addNamed(ctx, img, d.RepoTags)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, got)
	}
	return out, nil
}

func (s Store) importLayout(ctx context.Context, dir string) ([]Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", dir, ErrFormat, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	var out []Image
	for _, d := range m.Manifests {
		img, err := pick(idx, d)
		if err != nil {
			return nil, fmt.Errorf("%s: manifest %s: %w", dir, d.Digest, err)
		}
		var refs []string
		if r := d.Annotations["org.opencontainers.image.ref.name"]; r != "" {
			refs = append(refs, r)
		}
		got, err := s.addNamed(ctx, img, refs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		out = append(out, got)
	}
	return out, nil
}

// pick returns the image descriptor d names: itself, or for an index the image for this
// machine's platform.
func pick(idx v1.ImageIndex, d v1.Descriptor) (v1.Image, error) {
	if !d.MediaType.IsIndex() {
		return idx.Image(d.Digest)
	}
	child, err := idx.ImageIndex(d.Digest)
	if err != nil {
		return nil, err
	}
	m, err := child.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, c := range m.Manifests {
		if c.Platform == nil || (c.Platform.OS == "linux" && c.Platform.Architecture == runtime.GOARCH) {
			return pick(child, c)
		}
	}
	return nil, fmt.Errorf("no image for linux/%s in it", runtime.GOARCH)
}

func (s Store) addNamed(ctx context.Context, img v1.Image, refs []string) (Image, error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return Image{}, err
	}
	got, err := s.add(ctx, img, "")
	for _, r := range refs {
		if err == nil {
			unlock, lerr := s.lock()
			if lerr != nil {
				return Image{}, lerr
			}
			err = s.name(&got, normalise(r))
			unlock()
		}
	}
	return got, err
}

// tarNames lists the names in tar file (at most 100000 entries).
func tarNames(file string) (map[string]bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for len(names) < 100000 {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		names[path.Clean(hdr.Name)] = true
	}
	return names, nil
}

// extractLayout writes an OCI archive's regular files (its layout: oci-layout, index.json,
// blobs/) under dir; nothing else is taken from it.
func extractLayout(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if hdr.Typeflag != tar.TypeReg || rel == "" {
			continue
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := writeFile(dst, tr); err != nil {
			return err
		}
	}
}
