package node

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func init() {
	if os.Args[0] == InitArg0 {
		runtime.LockOSThread() // main then runs on the main thread (see InitMain)
	}
}

// InitMain is the node init process (PID 1 of the node), started by SetupMain in the node's
// user namespace with its mounts made and locked. It never returns.
func InitMain() {
	ready := os.NewFile(3, "ready")
	unix.Close(4) // the trellis binary it was executed from
	var cfg Config
	err := json.NewDecoder(os.Stdin).Decode(&cfg)
	if err == nil {
		// On the main thread (see init): /proc/PID/ns/cgroup, which `trellis exec` enters,
		// is the main thread's. The init is in its group already (SetupMain's was placed).
		err = unix.Unshare(unix.CLONE_NEWCGROUP)
	}
	if err == nil {
		err = setup(cfg)
	}
	if err != nil {
		fmt.Fprintf(ready, "error: %v\n", err)
		os.Exit(1)
	}
	if _, err := fmt.Fprint(ready, "ok\n"); err != nil {
		os.Exit(1) // trellis is gone: it would never mark this node ready
	}
	ready.Close()
	reap()
}

func setup(cfg Config) error {
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := mountProcSys(); err != nil {
		return err
	}
	files := append([]File{{Path: "/etc/hostname", Content: cfg.Hostname + "\n"}}, cfg.Files...)
	if err := writeFiles(files); err != nil {
		return err
	}
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	return nil
}

// reap waits for children forever, as PID 1 must: daemons started in the node are reparented
// here when their parent exits.
func reap() {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
		<-children
	}
}
