package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/shlex"
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
	Main bool     `json:",omitempty"` // Argv runs as the node's main process (before exec: lines, if any)
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
	default:
		p.takes(n, nd, k, KeyImage, Refusal{fmt.Sprintf("a %s node takes no image", nd.Kind), "remove `image:`, or make the node `kind: " + DefaultNodeKind + "`"})
	}
}

// ImageOverride is what a node's file changes of its image's config (`entrypoint:`, `cmd:`,
// `env:`, `keep-entrypoint:`), with docker's and containerlab's meaning. Nil when the node
// gives none of them.
type ImageOverride struct {
	Entrypoint []string `json:",omitempty"` // replaces the image's Entrypoint, and drops its Cmd unless Cmd is given
	Cmd        []string `json:",omitempty"` // replaces the image's Cmd
	Env        []string `json:",omitempty"` // NAME=value, added to the image's Env or replacing its NAME
	// KeepEntrypoint runs the entrypoint and cmd as the node's main process even when the node
	// has exec: (which then runs after it, as containerlab runs exec in a started container);
	// false with `keep-entrypoint: false`; nil: only when the node has no exec:.
	KeepEntrypoint *bool `json:",omitempty"`
}

// imageKeys reads a node's overrides of its image's config; nil if it gives none.
func (p *parser) imageKeys(f map[string]*yaml.Node, field string) *ImageOverride {
	o := &ImageOverride{}
	if v := f["entrypoint"]; v != nil {
		o.Entrypoint = p.argv(v, field+".entrypoint")
	}
	if v := f["cmd"]; v != nil {
		o.Cmd = p.argv(v, field+".cmd")
	}
	if v := f["env"]; v != nil {
		o.Env = p.env(v, field+".env")
	}
	if v := f["keep-entrypoint"]; v != nil {
		var keep bool
		if err := v.Decode(&keep); err != nil || v.Kind != yaml.ScalarNode {
			p.fail(v, field+".keep-entrypoint", fmt.Sprintf("%q is not true or false", v.Value), "write `keep-entrypoint: true` or remove the key")
		}
		o.KeepEntrypoint = &keep
	}
	if o.Entrypoint == nil && o.Cmd == nil && o.Env == nil && o.KeepEntrypoint == nil {
		return nil
	}
	return o
}

// argv reads `entrypoint` or `cmd`: a string split into words as a shell would (quotes and
// backslashes, no expansion: containerlab's reading), or a list of words taken as they are.
func (p *parser) argv(v *yaml.Node, field string) []string {
	var words []string
	if v.Kind == yaml.SequenceNode {
		words, _, _ = p.strs(v, field)
	} else if s, ok := p.str(v, field); ok {
		var err error
		if words, err = shlex.Split(s); err != nil {
			p.fail(v, field, fmt.Sprintf("%q cannot be split into words: %v", s, err), "close its quotes, or give the words as a list")
			return nil
		}
	}
	if len(words) == 0 {
		p.fail(v, field, "empty", "give the program and its arguments, e.g. `/usr/lib/frr/docker-start`, or remove the key")
		return nil
	}
	return words
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// env reads `env`: a mapping of variable names to values.
func (p *parser) env(v *yaml.Node, field string) []string {
	keys, vals, _ := p.pairs(v, field, mapping{"expected a mapping from variable to value", "write e.g. `env: {TZ: UTC}`",
		"variable given twice", "keep only one"})
	var out []string
	for i, k := range keys {
		fld := join(field, k.Value)
		switch {
		case !envNameRE.MatchString(k.Value):
			p.fail(k, fld, fmt.Sprintf("%q is not an environment variable's name", k.Value), "use letters, digits and _, not starting with a digit")
		case vals[i].Kind != yaml.ScalarNode:
			p.fail(vals[i], fld, "expected a single value", "write the value on one line after the colon, quoted if need be")
		default:
			out = append(out, k.Value+"="+vals[i].Value)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// validateImageKeys refuses the overrides of an image's config on a node without an image,
// but for env:, which any container node's exec: lines (and main process) run with.
func (p *parser) validateImageKeys(n *Network, nd *Node, k NodeKind) {
	if nd.ImageSet == nil {
		return
	}
	if nd.lines["env"] != 0 {
		p.takes(n, nd, k, KeyEnv, Refusal{fmt.Sprintf("a %s node takes no env:", nd.Kind), "remove `env:`, or set the variables in the exec: lines"})
	}
	if nd.Image != "" {
		return
	}
	for _, key := range []string{"entrypoint", "cmd", "keep-entrypoint"} {
		if nd.lines[key] != 0 {
			p.add(n.NodeError(nd, key, "only a node of a container image has an entrypoint to change",
				"add `image: REF`, or remove the key (a node without an image runs only its exec: lines)"))
		}
	}
}

// Apply gives run, what the image's config says to run (its Entrypoint ep and Cmd cmd), the
// node's overrides; exec says whether the node has exec: lines. It returns run.
func (o *ImageOverride) Apply(run *ImageRun, ep, cmd []string, exec bool) *ImageRun {
	run.Main = !exec
	if o != nil {
		if o.Entrypoint != nil {
			ep, cmd = o.Entrypoint, nil
		}
		if o.Cmd != nil {
			cmd = o.Cmd
		}
		run.Env = MergeEnv(run.Env, o.Env)
		if o.KeepEntrypoint != nil {
			run.Main = *o.KeepEntrypoint
		}
	}
	run.Argv = append(slices.Clone(ep), cmd...)
	return run
}

// MergeEnv returns env with add's variables added, replacing those of the same name.
func MergeEnv(env, add []string) []string {
	out := slices.Clone(env)
	for _, kv := range add {
		name, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		if i >= 0 {
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return out
}
