package rtnl

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// DialPid opens a Conn in the network namespace of process pid. Reading a namespace from a
// socket of its own costs a few system calls more than reading it by its id from the
// caller's (Links(nsid)), but it is the cheaper of the two when the caller's namespace holds
// thousands of namespace ids, as a machine's root does with a node per id: the kernel names
// each veth peer's namespace by walking every id of the socket's namespace (peernet2id), and a
// node's namespace knows only a few.
func DialPid(pid int) (*Conn, error) {
	ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("rtnl: namespace of process %d: %w", pid, err)
	}
	defer unix.Close(ns)
	runtime.LockOSThread()
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("rtnl: own namespace: %w", err)
	}
	defer unix.Close(home)
	if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("rtnl: entering the namespace of process %d: %w", pid, err)
	}
	c, err := Dial()
	if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, and so ends with its goroutine instead of serving others
		// in the wrong namespace.
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("rtnl: back from the namespace of process %d: %w", pid, err)
	}
	runtime.UnlockOSThread()
	return c, err
}
