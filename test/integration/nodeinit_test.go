//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/noderuntime"
)

// An idle container node holds one of the host's tasks: its init, single-threaded once it has
// set the node up (internal/noderuntime/pid1). It keeps nothing of trellis's caller open (only its
// standard input, output and error, /dev/null), ignores the signals the Go init ignored or
// caught, and the kernel reaps the orphans it inherits; SIGKILL (down) ends it. On 8caf0ab the
// Go init held three or four threads, its configuration pipe as standard input, and the
// descriptors trellis's caller left open.
func TestNodeInitIsOneTask(t *testing.T) {
	e := start(t)
	// A descriptor that `trellis up`'s caller leaves open, as a shell often does.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(trellisBin, "--state-dir", e.state, "up", writeTopo(t, fmt.Sprintf(isoTopo, "onetask")))
	cmd.ExtraFiles = []*os.File{w}
	out, err := cmd.CombinedOutput()
	w.Close()
	if err != nil {
		t.Fatalf("trellis up: %v\n%s", err, out)
	}
	pids := inspect(t, e.state, "onetask").pids()
	if len(pids) != 2 {
		t.Fatalf("inspect lists nodes %v, want a and b", pids)
	}
	const wantTasks = 1
	if noderuntime.InitTasks != wantTasks {
		t.Errorf("node.InitTasks, what the host-limits check counts per node, is %d, want %d", noderuntime.InitTasks, wantTasks)
	}
	for name, pid := range pids {
		if got := nodeTasks(t, pid); got != wantTasks {
			t.Errorf("node %s: its processes hold %d tasks, want %d", name, got, wantTasks)
		}
		if fds := openFDs(t, pid); !slices.Equal(fds, []string{"0", "1", "2"}) {
			t.Errorf("node %s: its init has descriptors %v open, want 0, 1 and 2 only", name, fds)
		}
		for _, fd := range []string{"0", "1", "2"} {
			if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd)); target != "/dev/null" {
				t.Errorf("node %s: its init's fd %s is %s, want /dev/null", name, fd, target)
			}
		}
	}
	// An orphan for a's init to inherit: its shell exits at once, the sleep a moment later.
	mustExec(t, e.state, "onetask", "a", "sh", "-c", "sleep 0.2 & exit 0")
	for name, pid := range pids {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGCHLD} {
			if err := syscall.Kill(pid, sig); err != nil {
				t.Fatalf("node %s: signal %v: %v", name, sig, err)
			}
		}
	}
	time.Sleep(time.Second) // the signals delivered
	for name, pid := range pids {
		if noderuntime.Gone(pid) {
			t.Errorf("node %s: its init ended on a signal other than SIGKILL", name)
		}
		// The orphan ends 0.2 s after its shell, and its init reaps it when the kernel next
		// runs it: a zombie may be seen for a moment on a busy machine, never for 10 s.
		var z []int
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if z = zombieChildren(t, pid); len(z) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(z) > 0 {
			t.Errorf("node %s: its init left children %v unreaped for 10 s", name, z)
		}
	}
	ping(t, e.state, "onetask", "a", "10.0.0.2")
	mustTrellis(t, e.state, "down", "onetask")
	e.assertClean()
}

// nodeTasks counts the tasks (threads) of every process in the PID namespace of the node
// whose init is pid.
func nodeTasks(t *testing.T, pid int) int {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if other, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || other != ns {
			continue
		}
		tasks, err := os.ReadDir("/proc/" + e.Name() + "/task")
		if err == nil {
			n += len(tasks)
		}
	}
	return n
}

// openFDs lists the descriptors process pid has open.
func openFDs(t *testing.T, pid int) []string {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range entries {
		fds = append(fds, e.Name())
	}
	slices.SortFunc(fds, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	return fds
}

// zombieChildren returns the pids of the children of process pid that ended and were not
// reaped.
func zombieChildren(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ')'.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) >= 2 && f[0] == "Z" && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
