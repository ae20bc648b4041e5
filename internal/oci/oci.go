// Package oci gives container nodes their root file system from a container image
// (`image: REF`, docs/images.md): pulled from a registry through the OCI distribution API, or
// imported from a `docker save` archive, an OCI archive or an OCI layout directory, with
// go-containerregistry for the formats and the protocol. Each image's layers are unpacked
// once into a directory of the cache named by the image's config digest, shared read-only by
// every node and network that runs it, as a `rootfs:` directory is.
package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/trellisnet/trellis/internal/spec"
)

// Subdir is the cache's subdirectory of container images.
const Subdir = "oci"

// ErrNoImage is returned for an image neither in the cache nor where its reference points.
var ErrNoImage = errors.New("no such image")

// Image is an unpacked image in the cache.
type Image struct {
	ID   string   // the config's sha256, hex: the image's identity
	Refs []string // the references it was pulled or imported as, normalised
	// Config is what the image says to run (Entrypoint, Cmd, Env, WorkingDir, User).
	Config   v1.Config
	Size     int64 // bytes the unpacked tree takes on disk
	Unpacked time.Time
	Took     time.Duration // how long unpacking took
	Dir      string        `json:"-"` // the image's directory in the cache
}

// Root is the image's root file system, a node's `rootfs:`.
func (img Image) Root() string { return filepath.Join(img.Dir, "rootfs") }

// Store is the cache's directory of container images.
type Store struct {
	Dir string
	// Mirrors are registry mirrors (host[:port]) tried, in order, before Docker Hub for its
	// images, as dockerd's registry-mirrors.
	Mirrors []string
}

// NewStore is the container images of cache (internal/image's DefaultCache, or another).
func NewStore(cache string) Store { return Store{Dir: filepath.Join(cache, Subdir)} }

const metaFile = "image.json"

func load(dir string) (Image, error) {
	var img Image
	data, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err == nil {
		err = json.Unmarshal(data, &img)
	}
	img.Dir = dir
	return img, err
}

// save writes the image's record beside its tree, replacing the old one at once.
func (img Image) save() error {
	data, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(img.Dir, metaFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(img.Dir, metaFile))
}

// List returns the cached images, newest first.
func (s Store) List() ([]Image, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Image
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if img, err := load(filepath.Join(s.Dir, e.Name())); err == nil {
			out = append(out, img)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Unpacked.After(out[j-1].Unpacked); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// Find returns the cached image that ref (a reference, or an ID or its first 12 or more hex
// digits) names.
func (s Store) Find(ref string) (Image, error) {
	imgs, err := s.List()
	if err != nil {
		return Image{}, err
	}
	norm := normalise(ref)
	for _, img := range imgs {
		if len(ref) >= 12 && strings.HasPrefix(img.ID, strings.TrimPrefix(ref, "sha256:")) {
			return img, nil
		}
		for _, r := range img.Refs {
			if r == norm {
				return img, nil
			}
		}
	}
	return Image{}, fmt.Errorf("image %s: %w in %s", ref, ErrNoImage, s.Dir)
}

// Run is what a node started from img runs: its main process and environment.
func (img Image) Run() (*spec.ImageRun, error) {
	c := img.Config
	run := &spec.ImageRun{Ref: firstOr(img.Refs, img.ID), Argv: append(append([]string{}, c.Entrypoint...), c.Cmd...),
		Env: c.Env, Dir: c.WorkingDir}
	if c.User != "" {
		ids, err := lookupUser(img.Root(), c.User)
		if err != nil {
			return nil, fmt.Errorf("image %s: its config's User %q: %w", run.Ref, c.User, err)
		}
		run.User = ids
	}
	return run, nil
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}
