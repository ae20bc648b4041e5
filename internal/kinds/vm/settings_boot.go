package vm

import (
	"fmt"
	"os"
	"strings"

	"github.com/trellisnet/trellis/internal/spec"
	"gopkg.in/yaml.v3"
)

// Agent says whether the node's guest runs the trellis agent: not when the user gives their own
// initrd, whose /init is not trellis's (`vm: {initrd: ...}`), or their own disk.
func (s *Settings) Agent() bool { return s == nil || s.Initrd == "" && s.Disk == "" }

// agentKeys are the node keys that only the guest agent applies.
var agentKeys = []string{"addresses", "sysctl", "files", "exec"}

// vmBoot reads `kernel`, `initrd` and `append`: the user's own kernel, initramfs and extra
// kernel command line. Paths are resolved against the topology file's directory.
func readBoot(p *spec.Reader, s *Settings, f map[string]*yaml.Node, field string) {
	if v := f["kernel"]; v != nil {
		s.Kernel = bootFile(p, v, field+".kernel")
	}
	if v := f["initrd"]; v != nil {
		s.Initrd = bootFile(p, v, field+".initrd")
		if f["kernel"] == nil {
			p.Fail(v, field+".initrd", "an initrd without a kernel", "give the kernel it boots with `kernel:`, or remove `initrd:`")
		}
	}
	if v := f["append"]; v != nil {
		s.Append, _ = p.Str(v, field+".append")
	}
	if v := f["disk"]; v != nil {
		readDisk(p, s, v, f, field)
	}
}

// vmDisk reads `disk`: the user's disk image, qcow2 or raw, which boots on its own.
func readDisk(p *spec.Reader, s *Settings, v *yaml.Node, f map[string]*yaml.Node, field string) {
	for _, k := range []string{"kernel", "initrd", "append"} {
		if f[k] != nil {
			p.Fail(f[k], field+"."+k, "a VM with its own disk boots the kernel on the disk", "remove `"+k+"`, or `disk` to boot a kernel")
		}
	}
	if s.Disk = bootFile(p, v, field+".disk"); s.Disk == "" || p.Cluster() {
		return // a cluster's image is read by the agent that runs it (UseImages)
	}
	format, err := spec.DiskFormat(s.Disk)
	if err != nil {
		p.Fail(v, field+".disk", err.Error(), "give a qcow2 image or a raw disk (e.g. made with `qemu-img create -f qcow2 FILE 1G`)")
		s.Disk = ""
		return
	}
	s.DiskFormat = format
}

// bootFile reads a path that must name a readable regular file; "" if it does not. In a
// cluster, it reads an image's name instead (imageName), and looks at no file.
func bootFile(p *spec.Reader, n *yaml.Node, field string) string {
	path, ok := p.Str(n, field)
	if !ok {
		return ""
	}
	if p.Cluster() { // a name, not a path: sent files may give it too
		return imageName(p, n, field, path)
	}
	if p.HostPath(n, field, "remove it: the VM then boots trellis's kernel and initramfs") {
		return ""
	}
	if path == "" {
		p.Fail(n, field, "the path is empty", "give the file's path, absolute or relative to the topology file")
		return ""
	}
	path = p.Beside(path)
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		p.Fail(n, field, fmt.Sprintf("cannot use %s: %v", path, err), "give the path of an existing file, absolute or relative to the topology file")
		return ""
	case !fi.Mode().IsRegular():
		p.Fail(n, field, path+" is not a regular file", "give the path of a file, not of a directory or device")
		return ""
	}
	fh, err := os.Open(path)
	if err != nil {
		p.Fail(n, field, fmt.Sprintf("cannot read %s: %v", path, err), "make the file readable by the user running trellis")
		return ""
	}
	fh.Close()
	return path
}

// refuseAgentKeys reports the keys the agent would apply on a node whose guest has none.
func refuseAgentKeys(p *spec.Reader) {
	field := strings.TrimSuffix(p.Field, ".vm")
	for _, k := range agentKeys {
		if v := p.Sibling(k); v != nil {
			p.Fail(v, field+"."+k, "a VM booted from the user's own initrd or disk has no trellis agent to apply `"+k+"`",
				"configure the guest in its own image and remove `"+k+"`, or drop `vm.initrd` or `vm.disk` to use trellis's initramfs")
		}
	}
}
