package nodeinit

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrBadFilter is returned for a seccomp program that is not whole classic BPF instructions.
var ErrBadFilter = errors.New("bad seccomp program")

// InstallFilter installs prog, a classic BPF seccomp program (unix.SockFilter instructions in
// the machine's byte order, 8 bytes each; package node builds it), on every thread of the
// calling process (SECCOMP_FILTER_FLAG_TSYNC). Every process the caller starts from then on,
// and every program it executes, inherits the filter; nothing removes it. It is installed
// without no_new_privs: the kernel allows that to a process with CAP_SYS_ADMIN in its user
// namespace, which a node's init (root of the node's) and trellis (host root) have.
func InstallFilter(prog []byte) error {
	n := len(prog) / int(unsafe.Sizeof(unix.SockFilter{}))
	if n == 0 || n > 0xffff || len(prog)%int(unsafe.Sizeof(unix.SockFilter{})) != 0 {
		return fmt.Errorf("%w: %d bytes", ErrBadFilter, len(prog))
	}
	fprog := unix.SockFprog{Len: uint16(n), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp filter: %w", errno)
	case r != 0: // TSYNC: the thread that could not take the filter
		return fmt.Errorf("seccomp filter: thread %d could not be synchronised", r)
	}
	return nil
}
