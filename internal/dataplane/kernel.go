package dataplane

// What the data plane needs of the kernel beyond what every supported kernel (6.1, Debian 12's)
// has, found by asking the kernel, not by its version: a feature that is missing is refused
// before anything is created (substrate's preflight) and by the call that would need it, with
// the feature, the kernel found and the one needed (the table under README.md's requirements).

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// ErrKernel is returned when the kernel lacks a feature that what was asked needs.
var ErrKernel = errors.New("kernel feature missing")

// KernelRelease is the running kernel's release (uname -r).
func KernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

var (
	kernCtxOnce sync.Once
	kernCtxOK   bool
)

// haveCastToKernCtx tells whether the kernel has the bpf_cast_to_kern_ctx kfunc (Linux 6.2),
// which corruption needs to see whether a frame's checksum is pending (bpf/impair.c): from the
// kernel's BTF.
func haveCastToKernCtx() bool {
	kernCtxOnce.Do(func() {
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			return
		}
		var fn *btf.Func
		kernCtxOK = spec.TypeByName("bpf_cast_to_kern_ctx", &fn) == nil
	})
	return kernCtxOK
}

// CheckCorrupt says whether this kernel can corrupt frames: nil, or an ErrKernel that names
// what is missing.
func CheckCorrupt() error {
	if haveCastToKernCtx() {
		return nil
	}
	return fmt.Errorf("%w: corruption needs Linux 6.2 or later (the bpf_cast_to_kern_ctx kfunc), and this machine runs %s", ErrKernel, KernelRelease())
}
