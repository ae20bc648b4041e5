package measure

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// RelayCmd is the hidden `trellis-bench` sub-command that forwards UDP in user space, inside the
// node under test of setup userspace: the PL-VINI baseline (a Click Socket element there).
const RelayCmd = "__relay"

// Relay receives UDP datagrams on listen and sends each to to, one system call per datagram and
// direction, as a simple user-space forwarder does. It prints "ready" once it listens, and runs
// until killed. With cpu >= 0 it runs on that CPU only.
func Relay(listen, to string, cpu int) error {
	runtime.GOMAXPROCS(1)
	if cpu >= 0 {
		if err := pinProcess(cpu); err != nil {
			return err
		}
	}
	laddr, err := net.ResolveUDPAddr("udp4", listen)
	if err != nil {
		return err
	}
	raddr, err := net.ResolveUDPAddr("udp4", to)
	if err != nil {
		return err
	}
	in, err := net.ListenUDP("udp4", laddr)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := net.DialUDP("udp4", nil, raddr)
	if err != nil {
		return err
	}
	defer out.Close()
	fmt.Println("ready")
	buf := make([]byte, 65536)
	for {
		n, _, err := in.ReadFromUDP(buf)
		if err != nil {
			return err
		}
		out.Write(buf[:n]) // a refused send (full queue) is the relay's loss
	}
}

// pinProcess binds every thread of this process (and so the threads it makes later) to cpu.
func pinProcess(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pinning to CPU %d: %w", cpu, err)
		}
	}
	return nil
}
