package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// netkit devices (Linux 6.7) are veth-like pairs whose transmit runs a BPF program in place of
// the peer's receive pass, which would spare the shortbridge the second receive round that
// bpf_redirect_peer costs. Trellis detects them at start; until a kernel it is tested on has
// them, ports stay veth pairs, the fallback, whatever the answer.

// NetkitSupport says whether this kernel has netkit devices, and how that was found out (or
// why not). It only reads: the kernel's BTF (netkit built in, or its module loaded) and the
// module tree of the running kernel (netkit as a module not loaded yet).
func NetkitSupport() (bool, string) {
	var uts unix.Utsname
	release := ""
	if unix.Uname(&uts) == nil {
		release = unix.ByteSliceToString(uts.Release[:])
	}
	return netkitIn("/sys/kernel/btf", filepath.Join("/lib/modules", release), func(name string) (bool, error) {
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			return false, err
		}
		_, err = spec.AnyTypeByName(name)
		if errors.Is(err, btf.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	})
}

// netkitIn is NetkitSupport with the places it looks in given: the BTF directory, the module
// tree, and a lookup of a type in the kernel's BTF.
func netkitIn(btfDir, modules string, hasType func(string) (bool, error)) (bool, string) {
	if _, err := os.Stat(filepath.Join(btfDir, "netkit")); err == nil {
		return true, "netkit module loaded (" + filepath.Join(btfDir, "netkit") + ")"
	}
	found, err := hasType("netkit")
	if found {
		return true, "netkit built into the kernel (struct netkit in its BTF)"
	}
	for _, ko := range []string{"netkit.ko", "netkit.ko.xz", "netkit.ko.zst", "netkit.ko.gz"} {
		p := filepath.Join(modules, "kernel", "drivers", "net", ko)
		if _, serr := os.Stat(p); serr == nil {
			return true, "netkit module available (" + p + ")"
		}
	}
	if err != nil {
		return false, fmt.Sprintf("no netkit module, and the kernel's BTF cannot be read (%v)", err)
	}
	return false, "no netkit in this kernel (not in its BTF, no module in " + modules + ")"
}
