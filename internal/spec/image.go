package spec

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"gopkg.in/yaml.v3"
)

// A container node may run from a container image, `image: REF` (docs/images.md): a registry
// reference (frrouting/frr:v8.4.0, 127.0.0.1:5000/lab/pc@sha256:...) or the name of an image
// imported with `trellis image import`. `up` gets the image (package oci) before it creates
// anything, and the node's Rootfs becomes the image's unpacked tree and its Run what the
// image's config says to run.

// ImageRun is what a node started from an image runs, from the image's config.
type ImageRun struct {
	Ref  string   // the image, as the file names it
	Argv []string `json:",omitempty"` // Entrypoint then Cmd: the node's main process, unless it has exec:
	Env  []string `json:",omitempty"` // the environment of the main process and of exec: lines
	Dir  string   `json:",omitempty"` // their working directory; "": /
	User string   `json:",omitempty"` // UID:GID of the main process; "": the node's root
}

// image reads `image`: a reference to a container image.
func (p *parser) image(v *yaml.Node, field string) string {
	ref, ok := p.str(v, field)
	if !ok {
		return ""
	}
	switch {
	case p.sent:
		p.fail(v, field, "a file sent to the API may not name an image: the server would pull it with its root's registry credentials into its cache",
			"run `trellis up FILE` as root on the machine, or send the file on the API's unix socket as root")
		return ""
	case p.cluster:
		p.fail(v, field, "container images are not yet pulled by a cluster's agents",
			"remove `image:`, or run the network with `trellis up` on one machine")
		return ""
	}
	if _, err := name.ParseReference(ref); err != nil {
		p.fail(v, field, fmt.Sprintf("%q is not an image reference: %v", ref, err),
			"write REPOSITORY[:TAG] or REPOSITORY@sha256:DIGEST, e.g. frrouting/frr:v8.4.0 or 127.0.0.1:5000/lab/pc:1")
		return ""
	}
	return ref
}

// validateImage checks a node's image against its kind and its rootfs.
func (p *parser) validateImage(n *Network, nd *Node, k NodeKind) {
	switch {
	case nd.Image == "":
	case nd.Rootfs != "" || nd.lines["rootfs"] != 0:
		p.add(n.NodeError(nd, "image", "both image: and rootfs: give the node's root file system",
			"keep one: `image: REF` runs a container image, `rootfs: DIR` a directory you made"))
	case k.VM:
		p.add(n.NodeError(nd, "image", "a vm node boots its own disk, not a container image",
			"remove `image:`, and give the VM its own root file system with `vm: {disk: IMAGE}`"))
	case !k.Rootfs:
		p.add(n.NodeError(nd, "image", fmt.Sprintf("a %s node takes no image", nd.Kind), "remove `image:`, or make the node `kind: container`"))
	}
}
