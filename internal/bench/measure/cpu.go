package measure

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// idleTime returns how long cpu has been idle (idle and iowait of /proc/stat). With a tickless
// kernel (NO_HZ, the default) this is measured at every entry to and exit from idle, not
// sampled at ticks, so it is exact to the 10 ms unit of /proc/stat; the busy fields (user,
// system, softirq) are sampled at ticks unless the kernel has IRQ_TIME_ACCOUNTING, so busy time
// is taken as elapsed time less idle time.
func idleTime(cpu int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	want := "cpu" + strconv.Itoa(cpu) + " "
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, want) {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 {
			break
		}
		idle, _ := strconv.ParseUint(f[4], 10, 64)
		iowait, _ := strconv.ParseUint(f[5], 10, 64)
		return time.Duration(idle+iowait) * time.Second / userHZ, nil
	}
	return 0, fmt.Errorf("/proc/stat has no cpu%d", cpu)
}

// userHZ is the unit of /proc/stat: 100 on every Linux architecture that trellis runs on.
const userHZ = 100

// BusyMeter measures how long one CPU was busy over an interval.
type BusyMeter struct {
	cpu  int
	t0   time.Time
	idle time.Duration
}

// StartBusy starts measuring cpu.
func StartBusy(cpu int) (*BusyMeter, error) {
	idle, err := idleTime(cpu)
	return &BusyMeter{cpu: cpu, t0: time.Now(), idle: idle}, err
}

// Stop returns the busy time and the elapsed time since StartBusy.
func (m *BusyMeter) Stop() (busy, elapsed time.Duration, err error) {
	idle, err := idleTime(m.cpu)
	elapsed = time.Since(m.t0)
	return max(0, elapsed-(idle-m.idle)), elapsed, err
}

// TaskTime is the CPU time in nanoseconds that all threads of process pid have had so far
// (the first field of each thread's schedstat); 0 for pid 0.
func TaskTime(pid int) (uint64, error) {
	if pid == 0 {
		return 0, nil
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("process %d: no schedstat (%v)", pid, err)
	}
	var sum uint64
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		if f := strings.Fields(string(data)); len(f) > 0 {
			v, _ := strconv.ParseUint(f[0], 10, 64)
			sum += v
		}
	}
	return sum, nil
}

// IRQTimeAccounting says whether the kernel was built with IRQ_TIME_ACCOUNTING, which keeps
// interrupt and softirq time out of the time charged to the task they interrupt. Unknown
// (no kernel config to read) counts as not.
func IRQTimeAccounting() bool {
	var u unix.Utsname
	unix.Uname(&u)
	var config []byte
	if data, err := os.ReadFile("/boot/config-" + unix.ByteSliceToString(u.Release[:])); err == nil {
		config = data
	} else if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if z, err := gzip.NewReader(f); err == nil {
			config, _ = io.ReadAll(z)
		}
	}
	return bytes.Contains(config, []byte("\nCONFIG_IRQ_TIME_ACCOUNTING=y\n"))
}
