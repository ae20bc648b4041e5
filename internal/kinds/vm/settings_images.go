package vm

import (
	"fmt"

	"github.com/trellisnet/trellis/internal/spec"
	"gopkg.in/yaml.v3"
)

// In a cluster, a VM's `kernel`, `initrd` and `disk` are the names of images of the machines'
// image store (spec/images.go): the file is parsed without looking at any file, and the agent
// that runs the VM resolves the names in its machine's store (UseImages).

// imageName reads the name of an image of the store; "" if it is not one.
func imageName(p *spec.Reader, n *yaml.Node, field, name string) string {
	if !spec.ValidImageName(name) {
		p.Fail(n, field, fmt.Sprintf("%q is not an image name: in a cluster a VM's kernel, initrd and disk are images of the machines' image store, named without a path", name), spec.ImageFix)
		return ""
	}
	return name
}

// UseImages resolves the settings' image names to the files of the image store dir (each must
// be a regular file there, owned by root and writable by no one else), and a disk's format (a
// raw disk, or a qcow2 image that names no other file): spec.ImageUser.
func (s *Settings) UseImages(dir string) []spec.FieldProblem {
	var out []spec.FieldProblem
	for _, f := range []struct {
		field string
		name  *string
	}{{"kernel", &s.Kernel}, {"initrd", &s.Initrd}, {"disk", &s.Disk}} {
		if *f.name == "" {
			continue
		}
		path, err := spec.StoreImage(dir, *f.name)
		if err == nil && f.field == "disk" {
			s.DiskFormat, err = spec.StoreDiskFormat(path)
		}
		if err != nil {
			out = append(out, spec.FieldProblem{Field: f.field, Msg: fmt.Sprintf("image %q: %v", *f.name, err)})
			continue
		}
		*f.name = path
	}
	return out
}

// Grants lists the settings that a cluster tenant's quota must grant (spec.Granted).
func (s *Settings) Grants() []spec.Grant {
	var out []spec.Grant
	if s.PrioVCPU > 0 || s.PrioIO > 0 {
		out = append(out, spec.Grant{Field: "vm.priority", Grant: spec.GrantRealtime})
	}
	if s.Reserve > 0 {
		out = append(out, spec.Grant{Field: "vm.reserve", Grant: spec.GrantRealtime})
	}
	if len(s.PinVCPU) > 0 || len(s.PinIO) > 0 {
		out = append(out, spec.Grant{Field: "vm.pin", Grant: spec.GrantPin})
	}
	return out
}
