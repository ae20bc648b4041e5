package spec

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"

	"gopkg.in/yaml.v3"
)

// In a cluster, a tenant names no file of a machine: a VM's `kernel`, `initrd` and `disk` are
// the names of images that the administrator put in every machine's image store, the directory
// ImageStore of its state directory (docs/cluster.md, "VM images"). The file is parsed without
// looking at any file (so no error says whether a path exists), and the agent that runs the VM
// resolves the names in its machine's store (UseImages).

// ImageStore is the directory, in a machine's state directory, of the VM images a cluster's
// networks may name.
const ImageStore = "vm-images"

// imageNameRE is what an image's name may be: a file name of the store, no path, no dot first.
var imageNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

const imageFix = "give the name of an image of the machines' image store (the administrator puts it in STATE_DIR/" +
	ImageStore + "/NAME on every machine; docs/cluster.md, VM images)"

// imageName reads the name of an image of the store; "" if it is not one.
func (p *parser) imageName(n *yaml.Node, field, name string) string {
	if !imageNameRE.MatchString(name) {
		p.fail(n, field, fmt.Sprintf("%q is not an image name: in a cluster a VM's kernel, initrd and disk are images of the machines' image store, named without a path", name), imageFix)
		return ""
	}
	return name
}

// UseImages resolves the image names of the VM nodes of network n, as ParseCluster read them,
// to the files of the image store dir (STATE_DIR/ImageStore): each must be a regular file there
// (not a link), owned by root (the user the agent runs as) and writable by no one else, and a
// disk a raw disk or a qcow2 image that names no other file. Errors name the node, the field
// and the image, and no path.
func (n *Network) UseImages(dir string) error {
	var errs Errors
	for _, nd := range n.Nodes {
		s := nd.VM
		if s == nil {
			continue
		}
		for _, f := range []struct {
			field string
			name  *string
		}{{"kernel", &s.Kernel}, {"initrd", &s.Initrd}, {"disk", &s.Disk}} {
			if *f.name == "" {
				continue
			}
			path, err := storeImage(dir, *f.name)
			if err == nil && f.field == "disk" {
				s.DiskFormat, err = storeDiskFormat(path)
			}
			if err != nil {
				errs = append(errs, n.NodeError(nd, "vm."+f.field, fmt.Sprintf("image %q: %v", *f.name, err), imageFix))
				continue
			}
			*f.name = path
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// storeImage returns the path of image name in the store dir, if it may serve.
func storeImage(dir, name string) (string, error) {
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

// storeDiskFormat is DiskFormat of an image of the store, with errors that name no path.
func storeDiskFormat(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot be read")
	}
	defer f.Close()
	return diskFormat(f)
}

// The fields of a qcow2 header (QEMU's docs/interop/qcow2.txt) that name other files: a
// backing file, and from version 3 an external data file (incompatible feature bit 2).
const (
	qcow2Header         = 80 // bytes read: up to incompatible_features
	qcow2ExternalData   = 1 << 2
	qcow2BackingOffset  = 8
	qcow2Incompatible   = 72
	qcow2VersionOffset  = 4
	qcow2MinHeaderBytes = 72
)

// checkQcow2 refuses a qcow2 image that reads another file: a backing file (which may be any
// file or device of the machine) or an external data file. Its version must be 2 or 3.
func checkQcow2(head []byte) error {
	if len(head) < qcow2MinHeaderBytes {
		return fmt.Errorf("a qcow2 header of %d bytes is cut short", len(head))
	}
	switch v := binary.BigEndian.Uint32(head[qcow2VersionOffset:]); {
	case v != 2 && v != 3:
		return fmt.Errorf("qcow2 version %d (want 2 or 3)", v)
	case binary.BigEndian.Uint64(head[qcow2BackingOffset:]) != 0:
		return fmt.Errorf("a qcow2 image with a backing file: an image must hold all its data (make one with `qemu-img convert -O qcow2 IMAGE FLAT`)")
	case v == 3 && len(head) >= qcow2Header && binary.BigEndian.Uint64(head[qcow2Incompatible:])&qcow2ExternalData != 0:
		return fmt.Errorf("a qcow2 image with an external data file: an image must hold all its data (make one with `qemu-img convert -O qcow2 IMAGE FLAT`)")
	}
	return nil
}
