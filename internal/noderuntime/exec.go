package noderuntime

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/helperproc"
	"golang.org/x/sys/unix"
)

// Env is the environment of commands run in a node: nothing of the caller's leaks in.
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
}

// ErrNotInit is returned when a command is to enter a process that is not (or no longer) a
// node's init.
var ErrNotInit = errors.New("not a node's init")

// Command returns the command line that runs argv inside the node whose init is pid, as the
// node's root, in the node's control group. trellis re-executes itself (JoinArg, JoinMain) to
// join the group, then executes the enter program (enter/enter.c) from a sealed in-memory file
// with a pidfd of the init: it enters all the init's namespaces at once, which sets its root
// and working directory to the node's, and runs argv from the node's own file system. No
// directory of the host is open in the node, and nothing that the node can mount over (its
// /proc) is executed or trusted on the way in.
func Command(pid int, argv ...string) (*exec.Cmd, error) {
	return CommandAs(pid, RunAs{}, argv...)
}

// RunAs says how CommandAs runs a command besides its argv: as which of the node's users,
// where, with what environment, and whether the command is left running.
type RunAs struct {
	User   string   // UID:GID in the node; "": the node's root
	Dir    string   // working directory in the node; "": /
	Env    []string // the command's environment; nil: Env
	Detach bool     // the command is left to the node's PID 1: Run returns once it was executed
}

// CommandAs is Command with the user, directory, environment and detachment of as.
func CommandAs(pid int, as RunAs, argv ...string) (*exec.Cmd, error) {
	self, err := helperproc.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{self, JoinArg, strconv.Itoa(pid)}
	if as.Detach {
		args = append(args, "-d")
	}
	if as.User != "" {
		args = append(args, "-u", as.User)
	}
	if as.Dir != "" {
		args = append(args, "-w", as.Dir)
	}
	args = append(append(args, "--"), argv...)
	cmd := &exec.Cmd{Path: self, Args: args, Env: Env}
	if as.Env != nil {
		cmd.Env = as.Env
	}
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
	fd, err := unix.Openat2(root, "."+path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0
}

// JoinMain is the JoinArg sub-command, run on the host: args are the node init's pid, "--"
// and a command line. It opens a pidfd of the init and checks that it is one, moves itself
// into the init's control groups, then executes the enter program with the pidfd and the
// command line.
func JoinMain(args []string) {
	err := fmt.Errorf("usage: %s PID [-d] [-u UID:GID] [-w DIR] -- COMMAND", JoinArg)
	dashes := slices.Index(args, "--")
	if len(args) > 2 && dashes > 0 && dashes < len(args)-1 && joinOptions(args[1:dashes]) {
		var pid, pidfd int
		pid, err = strconv.Atoi(args[0])
		if err == nil {
			pidfd, err = openInit(pid)
		}
		if err == nil {
			err = joinCgroups(pid)
		}
		if err == nil {
			err = installFilter() // inherited by the enter program, the command, and all it starts in the node
		}
		if err == nil {
			err = execEnter(pidfd, args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "trellis: running in a node: %v\n", err)
	os.Exit(127)
}

// joinOptions says whether opts are the enter program's options (CommandAs).
func joinOptions(opts []string) bool {
	for i := 0; i < len(opts); i++ {
		switch {
		case opts[i] == "-d":
		case (opts[i] == "-u" || opts[i] == "-w") && i+1 < len(opts):
			i++
		default:
			return false
		}
	}
	return true
}

// execEnter replaces this process with the enter program, the pidfd passed to it open; argv
// is the enter program's options, "--" and the command line.
func execEnter(pidfd int, argv []string) error {
	exe, err := sealedFile("trellis-enter", enterProgram)
	if err != nil {
		return err
	}
	defer exe.Close() // close-on-exec: the program holds no copy of it
	if _, err := unix.FcntlInt(uintptr(pidfd), unix.F_SETFD, 0); err != nil {
		return err
	}
	args := append([]string{"trellis-enter", strconv.Itoa(pidfd)}, argv...)
	return unix.Exec(fmt.Sprintf("/proc/self/fd/%d", exe.Fd()), args, os.Environ())
}

// openInit returns a pidfd of process pid once it has checked that the process is a node's
// init (isInit) while the pidfd refers to it: a pid reused meanwhile is not entered.
func openInit(pid int) (int, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("node init %d: %w", pid, err)
	}
	if !isInit(pid) || unix.PidfdSendSignal(fd, 0, nil, 0) != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("process %d: %w", pid, ErrNotInit)
	}
	return fd, nil
}

// isInit tells whether process pid is a node's init: its command line is a node's marker and
// it is process 1 of a PID namespace made by a process of this one (one level below it). A
// process of a node can take any command line, and be process 1 of a PID namespace of its own,
// but that namespace is at least two levels below: it cannot pass for another node's init.
func isInit(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.HasPrefix(string(cmdline), InitArg0+"\x00") {
		return false
	}
	return startedHere(InitArg0, pid)
}

// startedHere tells whether process pid is where trellis starts the processes marked with
// arg0: a node's init is process 1 of a PID namespace one level below trellis's; a node's
// engines helper is in trellis's own. A node's processes are at least one level below, and not
// process 1 of a namespace at that level.
func startedHere(arg0 string, pid int) bool {
	nspid, err := nsPIDs(strconv.Itoa(pid))
	if err != nil {
		return false
	}
	own, err := ownNSDepth()
	if err != nil {
		return false
	}
	if arg0 == InitArg0 {
		return len(nspid) == own+1 && nspid[own] == "1"
	}
	return len(nspid) == own
}

// ownNSDepth is the number of PID namespaces this process is in (1 in the host's).
var ownNSDepth = sync.OnceValues(func() (int, error) {
	ids, err := nsPIDs("self")
	return len(ids), err
})

// nsPIDs returns the pids of process pid in each PID namespace it is in, from the one of this
// process's /proc down to its own (the NSpid line of /proc/PID/status).
func nsPIDs(pid string) ([]string, error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return strings.Fields(rest), nil
		}
	}
	return nil, fmt.Errorf("process %s: no NSpid in its status", pid)
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
