package substrate

import (
	"errors"
	"strings"
	"testing"
)

func TestFitTasks(t *testing.T) {
	tests := []struct {
		name     string
		n, need  int
		host     hostTasks
		fits     bool
		contains []string
	}{
		{name: "fits", n: 1000, need: 4000, host: hostTasks{PidMax: 32768, ThreadsMax: 192729, InUse: 200}, fits: true},
		{name: "exactly the free tasks", n: 10, need: 32768 - 200 - tasksReserve, host: hostTasks{PidMax: 32768, ThreadsMax: 192729, InUse: 200}, fits: true},
		{name: "pid_max", n: 9000, need: 36000, host: hostTasks{PidMax: 32768, ThreadsMax: 192729, InUse: 200},
			contains: []string{"network chain", "9000 nodes need about 36000 tasks", "kernel.pid_max is 32768", "200 tasks run", "leaves 31544",
				"sysctl -w kernel.pid_max=4194304", "trellis does not change host settings"}},
		{name: "threads-max is lower", n: 2000, need: 8000, host: hostTasks{PidMax: 4194304, ThreadsMax: 9000, InUse: 500},
			contains: []string{"kernel.threads-max is 9000", "leaves 7476", "sysctl -w kernel.threads-max=36000"}},
		{name: "nothing free", n: 1, need: 4, host: hostTasks{PidMax: 32768, ThreadsMax: 192729, InUse: 32000},
			contains: []string{"leaves 0;", "kernel.pid_max=4194304"}},
		{name: "raise above the kernel's default most", n: 2000000, need: 8000000, host: hostTasks{PidMax: 4194304, ThreadsMax: 100000000, InUse: 100},
			contains: []string{"kernel.pid_max=8001124"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fitTasks("chain", tt.n, tt.need, tt.host)
			if tt.fits {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrHostLimit) {
				t.Fatalf("got %v, want ErrHostLimit", err)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q lacks %q", err, s)
				}
			}
		})
	}
}

// The host's limits are read from /proc, as the kernel gives them.
func TestReadHostTasks(t *testing.T) {
	h, err := readHostTasks()
	if err != nil {
		t.Fatal(err)
	}
	if h.PidMax < 301 || h.ThreadsMax < 1 || h.InUse < 1 {
		t.Fatalf("implausible %+v", h)
	}
}
