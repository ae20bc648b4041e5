package node

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Env is the environment of commands run in a node: nothing of the caller's leaks in.
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
}

// Command returns the command line that runs argv inside the node whose init is pid, with the
// node's reduced capabilities. nsenter (util-linux) enters all the node's namespaces: a Go
// process cannot enter a mount namespace itself once it has threads. Inside, /proc/1/exe is
// the trellis binary that started the node, reachable whatever the node's mounts hide.
func Command(pid int, argv ...string) (*exec.Cmd, error) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("nsenter (from util-linux) is needed to run commands in nodes: %w", err)
	}
	args := append([]string{"--target", strconv.Itoa(pid), "--mount", "--uts", "--ipc", "--net", "--pid",
		"--wd=/", "--", "/proc/1/exe", ExecArg, "--"}, argv...)
	cmd := exec.Command(nsenter, args...)
	cmd.Env = Env
	if term := os.Getenv("TERM"); term != "" {
		cmd.Env = append(cmd.Env, "TERM="+term)
	}
	return cmd, nil
}

// ExecMain is the ExecArg sub-command, run inside the node: it drops the capabilities a node
// must not have, then replaces itself with argv.
func ExecMain(argv []string) {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "trellis: nothing to run")
		os.Exit(2)
	}
	path, err := exec.LookPath(argv[0])
	if err == nil {
		err = dropCapabilities()
	}
	if err == nil {
		err = unix.Exec(path, argv, os.Environ())
	}
	fmt.Fprintf(os.Stderr, "trellis: %s: %v\n", argv[0], err)
	os.Exit(127)
}

// dropCapabilities removes from the bounding, inheritable, permitted and effective sets every
// capability not in Kept. Capabilities belong to a thread, so this thread stays locked and is
// the one that calls exec.
func dropCapabilities() error {
	runtime.LockOSThread()
	var keep [2]uint32
	for _, c := range Kept {
		keep[c/32] |= 1 << (c % 32)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if keep[c/32]&(1<<(c%32)) != 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for i := range data {
		data[i].Effective &= keep[i]
		data[i].Permitted &= keep[i]
		data[i].Inheritable &= keep[i]
	}
	return unix.Capset(&hdr, &data[0])
}

// Kept are the capabilities node processes keep: what a router and its daemons need (network
// administration, raw sockets, changing user) and none that reach beyond the node (module
// loading, raw I/O, mounting, reboot, time, tracing, BPF and the like).
var Kept = []int{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_FSETID,
	unix.CAP_KILL, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP, unix.CAP_NET_BIND_SERVICE,
	unix.CAP_NET_BROADCAST, unix.CAP_NET_ADMIN, unix.CAP_NET_RAW, unix.CAP_IPC_LOCK, unix.CAP_IPC_OWNER,
	unix.CAP_SYS_CHROOT, unix.CAP_SYS_NICE, unix.CAP_SYS_RESOURCE, unix.CAP_AUDIT_WRITE, unix.CAP_SETFCAP,
}
