package substrate

import (
	"context"

	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/oci"
	"github.com/trellisnet/trellis/internal/spec"
)

// resolveImages gets the container image of every node with `image:` (from the cache, or
// pulled: package oci) and gives the node its tree as Rootfs and its config as Run. It runs
// before anything of the network is created or changed: an image that cannot be had fails
// the up with nothing done. With cachedOnly (diff), nothing is pulled: a node whose image is
// not in the cache keeps no Rootfs, and shows as changed.
func resolveImages(ctx context.Context, n *spec.Network, opt Options, cachedOnly bool) error {
	store := oci.NewStore(image.CacheOr(opt.ImageCache))
	store.Mirrors = opt.Mirrors
	for _, nd := range n.Nodes {
		if nd.Image == "" {
			continue
		}
		var img oci.Image
		var err error
		if cachedOnly {
			if img, err = store.Find(nd.Image); err != nil {
				continue
			}
		} else if img, err = store.Get(ctx, nd.Image, opt.Log); err != nil {
			return n.NodeError(nd, "image", err.Error(), "check the reference, or import the image with `trellis image import FILE`")
		}
		run, err := img.Run()
		if err != nil {
			return n.NodeError(nd, "image", err.Error(), "give the image a User its /etc/passwd has, or none")
		}
		nd.Rootfs, nd.Run = img.Root(), nd.ImageSet.Apply(run, img.Config.Entrypoint, img.Config.Cmd, len(nd.Exec) > 0)
		nd.Run.Ref = nd.Image
	}
	return nil
}
