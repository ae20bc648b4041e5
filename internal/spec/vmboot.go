package spec

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// Agent says whether the node's guest runs the trellis agent: not when the user gives their own
// initrd, whose /init is not trellis's (`vm: {initrd: ...}`), or their own disk.
func (s *VMSettings) Agent() bool { return s == nil || s.Initrd == "" && s.Disk == "" }

// agentKeys are the node keys that only the guest agent applies.
var agentKeys = []string{"addresses", "sysctl", "files", "exec"}

// vmBoot reads `kernel`, `initrd` and `append`: the user's own kernel, initramfs and extra
// kernel command line. Paths are resolved against the topology file's directory.
func (p *parser) vmBoot(s *VMSettings, f map[string]*yaml.Node, field string) {
	if v := f["kernel"]; v != nil {
		s.Kernel = p.bootFile(v, field+".kernel")
	}
	if v := f["initrd"]; v != nil {
		s.Initrd = p.bootFile(v, field+".initrd")
		if f["kernel"] == nil {
			p.fail(v, field+".initrd", "an initrd without a kernel", "give the kernel it boots with `kernel:`, or remove `initrd:`")
		}
	}
	if v := f["append"]; v != nil {
		s.Append, _ = p.str(v, field+".append")
	}
	if v := f["disk"]; v != nil {
		p.vmDisk(s, v, f, field)
	}
}

// vmDisk reads `disk`: the user's disk image, qcow2 or raw, which boots on its own.
func (p *parser) vmDisk(s *VMSettings, v *yaml.Node, f map[string]*yaml.Node, field string) {
	for _, k := range []string{"kernel", "initrd", "append"} {
		if f[k] != nil {
			p.fail(f[k], field+"."+k, "a VM with its own disk boots the kernel on the disk", "remove `"+k+"`, or `disk` to boot a kernel")
		}
	}
	if s.Disk = p.bootFile(v, field+".disk"); s.Disk == "" || p.cluster {
		return // a cluster's image is read by the agent that runs it (UseImages)
	}
	format, err := DiskFormat(s.Disk)
	if err != nil {
		p.fail(v, field+".disk", err.Error(), "give a qcow2 image or a raw disk (e.g. made with `qemu-img create -f qcow2 FILE 1G`)")
		s.Disk = ""
		return
	}
	s.DiskFormat = format
}

// qcow2Magic starts every qcow2 image.
const qcow2Magic = "QFI\xfb"

// DiskFormat tells a qcow2 image ("qcow2") from a raw disk ("raw": anything else whose size is a
// whole number of 512-byte sectors), and refuses other files, and a qcow2 image that names
// another file (checkQcow2). Errors start with the path.
func DiskFormat(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	format, err := diskFormat(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return format, nil
}

// diskFormat is DiskFormat of an open file, with errors that name no path.
func diskFormat(f *os.File) (string, error) {
	head := make([]byte, qcow2Header)
	n, _ := io.ReadFull(f, head)
	if n >= len(qcow2Magic) && string(head[:len(qcow2Magic)]) == qcow2Magic {
		return "qcow2", checkQcow2(head[:n])
	}
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.Size() == 0 || st.Size()%512 != 0 {
		return "", fmt.Errorf("not a disk image: not qcow2, and its %d bytes are not whole 512-byte sectors of a raw disk", st.Size())
	}
	return "raw", nil
}

// bootFile reads a path that must name a readable regular file; "" if it does not. In a
// cluster, it reads an image's name instead (imageName), and looks at no file.
func (p *parser) bootFile(n *yaml.Node, field string) string {
	path, ok := p.str(n, field)
	if !ok {
		return ""
	}
	if p.cluster { // a name, not a path: sent files may give it too
		return p.imageName(n, field, path)
	}
	if p.hostPath(n, field, "remove it: the VM then boots trellis's kernel and initramfs") {
		return ""
	}
	if path == "" {
		p.fail(n, field, "the path is empty", "give the file's path, absolute or relative to the topology file")
		return ""
	}
	path = p.besideFile(path)
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		p.fail(n, field, fmt.Sprintf("cannot use %s: %v", path, err), "give the path of an existing file, absolute or relative to the topology file")
		return ""
	case !fi.Mode().IsRegular():
		p.fail(n, field, path+" is not a regular file", "give the path of a file, not of a directory or device")
		return ""
	}
	fh, err := os.Open(path)
	if err != nil {
		p.fail(n, field, fmt.Sprintf("cannot read %s: %v", path, err), "make the file readable by the user running trellis")
		return ""
	}
	fh.Close()
	return path
}

// refuseAgentKeys reports the keys the agent would apply on a node whose guest has none.
func (p *parser) refuseAgentKeys(f map[string]*yaml.Node, field string) {
	for _, k := range agentKeys {
		if v := f[k]; v != nil {
			p.fail(v, field+"."+k, "a VM booted from the user's own initrd or disk has no trellis agent to apply `"+k+"`",
				"configure the guest in its own image and remove `"+k+"`, or drop `vm.initrd` or `vm.disk` to use trellis's initramfs")
		}
	}
}

// besideFile is path, or, if it is relative, path in the topology file's directory.
func (p *parser) besideFile(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(filepath.Dir(p.file), path)
}
