package substrate

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
)

// ErrHostLimit is returned when the nodes of a network would not fit in what the host's
// kernel limits leave free. Trellis never changes the host's settings itself.
var ErrHostLimit = errors.New("host limit")

// tasksReserve is how many tasks the check keeps free for the rest of the machine (a shell,
// `trellis exec`, the programs the nodes start, trellis's own threads while it works).
const tasksReserve = 1024

// hostTasks is what the kernel allows and uses of tasks (every process and thread has a pid).
type hostTasks struct {
	PidMax     int // kernel.pid_max: pids are numbers below it
	ThreadsMax int // kernel.threads-max: tasks at most
	InUse      int // tasks that exist now
}

// readHostTasks reads the host's task limits and use from /proc.
func readHostTasks() (hostTasks, error) {
	var h hostTasks
	var err error
	if h.PidMax, err = readProcInt("/proc/sys/kernel/pid_max"); err != nil {
		return h, err
	}
	if h.ThreadsMax, err = readProcInt("/proc/sys/kernel/threads-max"); err != nil {
		return h, err
	}
	// The fourth field of /proc/loadavg is RUNNING/TOTAL, TOTAL being every task of the host.
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return h, err
	}
	f := strings.Fields(string(data))
	if len(f) < 4 || !strings.Contains(f[3], "/") {
		return h, fmt.Errorf("/proc/loadavg: unexpected %q", strings.TrimSpace(string(data)))
	}
	h.InUse, err = strconv.Atoi(f[3][strings.Index(f[3], "/")+1:])
	if err != nil {
		return h, fmt.Errorf("/proc/loadavg: %w", err)
	}
	return h, nil
}

func readProcInt(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// nodeTasks is what nodes hold of the host's tasks while idle (kinds.Tasker; one per node of
// other kinds).
func nodeTasks(nodes []*plan.Node) (int, error) {
	need := 0
	for _, nd := range nodes {
		k, err := kinds.NodeKind(nd.Kind)
		if err != nil {
			return 0, err
		}
		if t, ok := k.(kinds.Tasker); ok {
			need += t.Tasks(nd)
		} else {
			need++
		}
	}
	return need, nil
}

// checkTasks refuses, before anything is started, nodes (of network name) whose tasks would
// not fit in what kernel.pid_max and kernel.threads-max leave free, keeping tasksReserve for
// the rest of the machine: without it, `up` would fail half-way, at the first node whose
// threads the kernel refuses, and remove what it made.
func checkTasks(name string, nodes []*plan.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	need, err := nodeTasks(nodes)
	if err != nil {
		return err
	}
	h, err := readHostTasks()
	if err != nil {
		return fmt.Errorf("reading the host's task limits: %w", err)
	}
	return fitTasks(name, len(nodes), need, h)
}

// fitTasks is checkTasks' arithmetic: n nodes needing need tasks against host h.
func fitTasks(name string, n, need int, h hostTasks) error {
	limit, setting, raise := h.PidMax, "kernel.pid_max", 4194304 // the kernel's most on 64-bit
	if h.ThreadsMax < h.PidMax {
		limit, setting, raise = h.ThreadsMax, "kernel.threads-max", 4*h.ThreadsMax
	}
	free := limit - h.InUse - tasksReserve
	if need <= free {
		return nil
	}
	want := h.InUse + tasksReserve + need
	if raise < want {
		raise = want
	}
	return fmt.Errorf("%w: network %s: its %d nodes need about %d tasks (processes and threads), but %s is %d, "+
		"%d tasks run and %d are kept for the rest of the machine, which leaves %d; "+
		"raise the limit (`sysctl -w %s=%d`, as root; trellis does not change host settings) or make the network smaller",
		ErrHostLimit, name, n, need, setting, limit, h.InUse, tasksReserve, max(free, 0), setting, raise)
}
