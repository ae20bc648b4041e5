// Package image builds the guest images VM nodes boot (docs/design.md, decision 13): a Linux
// kernel from Debian's linux-image-amd64 package and an initramfs that holds the trellis
// binary as the guest's agent (internal/guest), the virtio drivers, busybox and the host's
// programs a router needs (ip, BIRD, ...) with their libraries, and FRR for the nodes that
// run it. Images are cached under an ID
// made from their inputs, so an image is built again only when an input changes.
package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/helperproc"
	"github.com/trellisnet/trellis/internal/logline"
)

// DefaultCache is where images and kernels are kept.
const DefaultCache = "/var/cache/trellis"

// CacheEnv names the environment variable from which the command line takes the cache's
// place, for `up` and `trellis image` alike.
const CacheEnv = "TRELLIS_IMAGE_CACHE"

// CacheOr is cache, or DefaultCache if it is empty.
func CacheOr(cache string) string {
	if cache == "" {
		return DefaultCache
	}
	return cache
}

// ErrNoImage is returned for an image ID not in the cache.
var ErrNoImage = errors.New("no such image")

// Image is a built image.
type Image struct {
	ID      string
	Dir     string `json:"-"`
	Kernel  string // path of the kernel
	Initrd  string // path of the initramfs
	Release string // the kernel's release (uname -r in the guest)
	Size    int64  // bytes of kernel and initramfs
	Built   time.Time
	Inputs  []string // what went in, as "path sha256"
	FRR     bool     `json:"-"` // it holds FRR (Spec.FRR), as its inputs say
}

// Spec says what goes into an image.
type Spec struct {
	// Programs are host programs copied in with their libraries; missing ones are skipped.
	Programs []string
	// FRR adds the host's FRR (Debian's frr package, frr.go): about 20 MB more, for nodes that
	// run it.
	FRR bool
	// Agent is the trellis binary that becomes the guest's /init; empty means
	// helperproc.Executable (this one).
	Agent string
}

// DefaultSpec is the image VM nodes get unless they name their own.
func DefaultSpec() Spec {
	return Spec{Programs: []string{
		"/usr/bin/busybox", "/usr/bin/bash", "/usr/bin/ip", "/usr/bin/ping", "/usr/sbin/bird", "/usr/sbin/birdc",
		"/usr/bin/iperf3", "/usr/bin/tcpdump", "/usr/sbin/tcpdump", // Debian 12 has it in /usr/bin
	}}
}

// Build returns the image for s from cache, building it first if its inputs changed. The
// kernel comes from Debian's package, downloaded once (FetchKernel).
func Build(ctx context.Context, cache string, s Spec, log *slog.Logger) (Image, error) {
	log = logline.OrDiscard(log)
	k, err := FetchKernel(ctx, cache, log)
	if err != nil {
		return Image{}, err
	}
	if s.Agent == "" {
		if s.Agent, err = helperproc.Executable(); err != nil {
			return Image{}, err
		}
	}
	c, err := collect(k, s)
	if err != nil {
		return Image{}, err
	}
	id := c.id()
	dir := filepath.Join(cache, "images", id)
	for attempt := 1; ; attempt++ {
		img, err := load(dir)
		if err != nil {
			log.Info(fmt.Sprintf("image: building %s (kernel %s, %d files)", id, k.Release, len(c.files)), "image", id)
			if img, err = write(cache, dir, id, k, c); err != nil {
				return img, err
			}
		}
		if err := hold(dir); errors.Is(err, ErrNoImage) && attempt < 3 {
			continue // pruned by another trellis meanwhile
		} else if err != nil {
			return Image{}, err
		}
		prune(cache, keep)
		return img, nil
	}
}

// keep is how many images the cache keeps: every rebuilt trellis binary or upgraded program
// makes a new one. A running VM does not need its image's files (QEMU read them at start).
const keep = 3

// prune removes all but the newest n images, and leaves those a trellis holds (hold).
func prune(cache string, n int) {
	imgs, err := List(cache)
	if err != nil {
		return
	}
	for _, img := range imgs[min(n, len(imgs)):] {
		removeUnheld(img.Dir)
	}
}

// List returns the cached images, newest first.
func List(cache string) ([]Image, error) {
	dirs, err := filepath.Glob(filepath.Join(cache, "images", "*"))
	if err != nil {
		return nil, err
	}
	var out []Image
	for _, d := range dirs {
		if img, err := load(d); err == nil {
			out = append(out, img)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Built.After(out[j].Built) })
	return out, nil
}

// Remove deletes a cached image, unless a running trellis holds it (ErrInUse).
func Remove(cache, id string) error {
	dir := filepath.Join(cache, "images", filepath.Base(id))
	if _, err := load(dir); err != nil {
		return fmt.Errorf("%w: %s", ErrNoImage, id)
	}
	if err := removeUnheld(dir); err != nil {
		return fmt.Errorf("image %s: %w", id, err)
	}
	return nil
}

func load(dir string) (Image, error) {
	data, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if err != nil {
		return Image{}, err
	}
	var img Image
	if err := json.Unmarshal(data, &img); err != nil {
		return Image{}, err
	}
	img.Dir = dir
	img.FRR = slices.ContainsFunc(img.Inputs, func(in string) bool { return strings.HasPrefix(in, frrVtysh+" ") })
	img.Kernel = filepath.Join(dir, "vmlinuz")
	img.Initrd = filepath.Join(dir, "initrd")
	return img, nil
}
