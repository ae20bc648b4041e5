package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/trellisnet/trellis/internal/cgroup"
	"golang.org/x/sys/unix"
)

// Env is the environment of commands run in a node: nothing of the caller's leaks in.
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
}

// Command returns the command line that runs argv inside the node whose init is pid, as the
// node's root, in the node's control group. trellis re-executes itself (JoinArg) to join the
// group, then nsenter (util-linux) enters all the node's namespaces, its user namespace first:
// a Go process cannot enter a mount or user namespace itself once it has threads. Inside,
// /proc/1/exe is the node's init program (package nodeinit), reachable whatever the node's
// mounts hide.
func Command(pid int, argv ...string) (*exec.Cmd, error) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("nsenter (from util-linux) is needed to run commands in nodes: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := append([]string{self, JoinArg, strconv.Itoa(pid), "--", nsenter, "--target", strconv.Itoa(pid),
		"--user", "--cgroup", "--mount", "--uts", "--ipc", "--net", "--pid",
		"--wd=/", "--", "/proc/1/exe", ExecArg, "--"}, argv...)
	cmd := &exec.Cmd{Path: self, Args: args, Env: Env}
	if term := os.Getenv("TERM"); term != "" {
		cmd.Env = append(cmd.Env, "TERM="+term)
	}
	return cmd, nil
}

// HasProgram says whether the file system of the node whose init is pid has an executable
// file at path (absolute), its symbolic links resolved in the node's root as the node resolves
// them: a node with `rootfs:` has only its directory's programs.
func HasProgram(pid int, path string) bool {
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, "."+path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0
}

// JoinMain is the JoinArg sub-command, run on the host: args are the node init's pid, "--"
// and a command line. It moves itself into the init's control groups, then executes the
// command, which inherits them.
func JoinMain(args []string) {
	err := fmt.Errorf("usage: %s PID -- COMMAND", JoinArg)
	if len(args) > 2 && args[1] == "--" {
		var pid int
		if pid, err = strconv.Atoi(args[0]); err == nil {
			err = joinCgroups(pid)
		}
		if err == nil {
			err = installFilter() // inherited by the command, and by all it starts in the node
		}
		if err == nil {
			err = unix.Exec(args[2], args[2:], os.Environ())
		}
	}
	fmt.Fprintf(os.Stderr, "trellis: running in a node: %v\n", err)
	os.Exit(127)
}

func joinCgroups(pid int) error {
	h, err := cgroup.Detect()
	if errors.Is(err, cgroup.ErrNoCgroups) {
		return nil
	}
	if err != nil {
		return err
	}
	return h.JoinOf(pid)
}
