package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
)

// In a cluster, a tenant names no file of a machine: e.g. a VM's `kernel`, `initrd` and `disk` are
// the names of images that the administrator put in every machine's image store, the directory
// ImageStore of its state directory (docs/cluster.md, "VM images"). The file is parsed without
// looking at any file (so no error says whether a path exists), and the agent that runs the VM
// resolves the names in its machine's store (UseImages).

// ImageStore is the directory, in a machine's state directory, of the VM images a cluster's
// networks may name.
const ImageStore = "vm-images"

// imageNameRE is what an image's name may be: a file name of the store, no path, no dot first.
var imageNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ImageFix is the fix of a problem with an image of the store.
const ImageFix = "give the name of an image of the machines' image store (the administrator puts it in STATE_DIR/" +
	ImageStore + "/NAME on every machine; docs/cluster.md, VM images)"

// ImageUser is Settings that name images of the machines' image store (a VM's kernel, initrd
// and disk): UseImages resolves the names to files of the store dir, returning the problem of
// each setting it could not resolve by its field below the settings' key ("kernel").
type ImageUser interface {
	UseImages(dir string) []FieldProblem
}

// FieldProblem is what is wrong with one field.
type FieldProblem struct{ Field, Msg string }

// UseImages resolves the image names of the nodes of network n, as ParseCluster read them, to
// the files of the image store dir (STATE_DIR/ImageStore), through the settings of their kinds
// (ImageUser). Errors name the node, the field and the image, and no path.
func (n *Network) UseImages(dir string) error {
	var errs Errors
	for _, nd := range n.Nodes {
		u, ok := nd.KindSettings().(ImageUser)
		if !ok {
			continue
		}
		k, _ := LookupNodeKind(nd.Kind)
		for _, fp := range u.UseImages(dir) {
			errs = append(errs, n.NodeError(nd, k.Settings.Key+"."+fp.Field, fp.Msg, ImageFix))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// ValidImageName says whether name may name an image of the store.
func ValidImageName(name string) bool { return imageNameRE.MatchString(name) }

// StoreImage returns the path of image name in the store dir, if it may serve: a regular file
// there (not a link), owned by root (the user the agent runs as) and writable by no one else.
func StoreImage(dir, name string) (string, error) {
	if !imageNameRE.MatchString(name) {
		return "", fmt.Errorf("not an image name")
	}
	path := filepath.Join(dir, name)
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("not in this machine's image store")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("not a regular file in this machine's image store")
	case !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0:
		return "", fmt.Errorf("in this machine's image store, but not owned by root (the agent's user) or writable by others: the administrator must fix it (chown root, chmod go-w)")
	}
	return path, nil
}

// StoreDiskFormat is DiskFormat of an image of the store, with errors that name no path: a raw
// disk or a qcow2 image that names no other file.
func StoreDiskFormat(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot be read")
	}
	defer f.Close()
	return diskFormat(f)
}
