// Package guestvm runs a command in a guest kernel under QEMU with this machine's own
// userspace, for testing trellis on kernels other than the host's (docs/guest-kernel.md): a
// Debian kernel package unpacked into the cache (FetchKernel), the host's root shared
// read-only over 9p under a tmpfs overlay, the package's modules as the guest's /lib/modules
// (modprobe works), and the harness binary itself as the guest's init (init.go). The command's
// output and exit status come back through a second 9p share, a results directory on the host.
//
// Nothing is global: each Run has its own QEMU, initramfs and results directory, so several
// guests can run at once (QEMUArgs adds their network cards).
package guestvm

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config says what to run in which kernel.
type Config struct {
	Kernel  Kernel
	Argv    []string      // the command, with paths as the host sees them
	Env     []string      // its environment (PATH and HOME are added if missing)
	Dir     string        // its working directory (default /)
	Memory  string        // the guest's memory, as QEMU's -m takes it (default 3G)
	CPUs    int           // its vCPUs (default 2)
	Timeout time.Duration // the whole run, boot included (default 10m)
	// Init is the guest's /init: a static binary that calls Init when it is pid 1 (default:
	// this executable).
	Init string
	// Work is where the initramfs and the results directory go (default: a new temporary
	// directory, removed after the run).
	Work     string
	Console  io.Writer // the guest's serial console as it comes (kernel messages and the command's output)
	QEMUArgs []string  // more QEMU arguments
	Hostname string    // the guest's host name (default "guest")
	// NIC, if set, gives the guest a network card on a host tap device, for guests that talk to
	// each other (a bridge of their taps is their switch): the guest's eth0, with NIC.Address,
	// instead of the dummy uplink a guest has without it.
	NIC *NIC
	// Netns runs QEMU in this named network namespace (ip netns), where NIC.Tap is.
	Netns string
}

// NIC is a guest's network card: a virtio-net device on the host's tap device Tap (made
// beforehand, e.g. ip tuntap add dev TAP mode tap, and attached to a bridge), with MAC address
// MAC (each guest on one bridge needs its own), and Address (a prefix, 198.18.0.1/24) on the
// guest's eth0.
type NIC struct {
	Tap, MAC, Address string
}

// Result is what a run gave.
type Result struct {
	ExitCode int           // the command's exit code (128+N when killed by signal N)
	Output   string        // its standard output and error
	Boot     time.Duration // from QEMU's start to the command's start
	Total    time.Duration // from QEMU's start to its end
}

// ErrNoStatus: the guest ended (or was stopped) before the command's status came back.
var ErrNoStatus = errors.New("guestvm: the guest ended without the command's exit status")

// Run boots the kernel and runs the command in it. An error means the guest could not say how
// the command ended (the command's own failure is Result.ExitCode).
func Run(ctx context.Context, c Config) (Result, error) {
	if err := c.defaults(); err != nil {
		return Result{}, err
	}
	if err := Check(ctx); err != nil {
		return Result{}, err
	}
	work := c.Work
	if work == "" {
		dir, err := os.MkdirTemp("", "guestvm-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(dir)
		work = dir
	}
	results := filepath.Join(work, "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		return Result{}, err
	}
	initrd := filepath.Join(work, "initrd")
	modules := bootModules
	s := spec{Argv: c.Argv, Env: c.Env, Dir: c.Dir, Modules: c.Kernel.Modules(), Release: c.Kernel.Release, Hostname: c.Hostname}
	if c.NIC != nil {
		modules, s.Address = append(modules[:len(modules):len(modules)], "virtio_net"), c.NIC.Address
	}
	if err := writeInitramfs(initrd, c.Init, c.Kernel, modules); err != nil {
		return Result{}, err
	}
	data, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(results, specFile), data, 0o644); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	start := time.Now()
	argv := append([]string{"qemu-system-x86_64"}, c.qemuArgs(initrd, results)...)
	if c.Netns != "" {
		argv = append([]string{"ip", "netns", "exec", c.Netns}, argv...) // it execs QEMU: one process
	}
	q := exec.CommandContext(ctx, argv[0], argv[1:]...)
	stop, followed := make(chan struct{}), make(chan struct{})
	if c.Console == nil {
		c.Console = io.Discard
	}
	go follow(filepath.Join(results, consoleFile), c.Console, stop, followed)
	qout, err := q.CombinedOutput()
	close(stop)
	<-followed
	res := Result{Total: time.Since(start), Boot: bootTime(results, start)}
	console, _ := os.ReadFile(filepath.Join(results, consoleFile))
	out, _ := os.ReadFile(filepath.Join(results, outputFile))
	res.Output = string(out)
	status, serr := os.ReadFile(filepath.Join(results, statusFile))
	code, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(status)), "exit "))
	if serr != nil || perr != nil {
		why := fmt.Sprintf("QEMU: %v %s", err, strings.TrimSpace(string(qout)))
		if ctx.Err() != nil {
			why = fmt.Sprintf("stopped after %s (timeout %s)", res.Total.Round(time.Second), c.Timeout)
		}
		return res, fmt.Errorf("%w (%s); the console's end:\n%s", ErrNoStatus, why, tail(string(console), 30))
	}
	res.ExitCode = code
	return res, nil
}

func (c *Config) defaults() error {
	if len(c.Argv) == 0 {
		return errors.New("guestvm: no command to run")
	}
	if c.Memory == "" {
		c.Memory = "3G"
	}
	if c.CPUs == 0 {
		c.CPUs = 2
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Dir == "" {
		c.Dir = "/"
	}
	if c.Hostname == "" {
		c.Hostname = "guest"
	}
	if n := c.NIC; n != nil && (n.Tap == "" || n.MAC == "" || n.Address == "") {
		return fmt.Errorf("guestvm: a network card needs a tap, a MAC and an address: %+v", *n)
	}
	env := strings.Join(c.Env, "\n")
	if !strings.Contains("\n"+env, "\nPATH=") {
		c.Env = append(c.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if !strings.Contains("\n"+env, "\nHOME=") {
		c.Env = append(c.Env, "HOME=/root")
	}
	if c.Init == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.Init = exe
	}
	return checkStatic(c.Init)
}

// checkStatic refuses an init that needs a dynamic loader: the initramfs has no libraries.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("guestvm: the guest's init %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("guestvm: the guest's init %s is linked dynamically: build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// qemuArgs boots the kernel under TCG (KVM does not work on our machines: docs/design.md) with
// the host's root and the results directory as 9p shares, the console on a file of results.
func (c *Config) qemuArgs(initrd, results string) []string {
	args := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-machine", "q35", "-accel", "tcg,thread=multi", "-cpu", "max",
		"-smp", strconv.Itoa(c.CPUs), "-m", c.Memory,
		"-kernel", c.Kernel.Vmlinuz(), "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 loglevel=4 rdinit=/init",
		"-serial", "file:" + filepath.Join(results, consoleFile),
		"-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
		"-fsdev", "local,id=results,path=" + results + ",security_model=none,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=results,mount_tag=results",
		// A disk, as a machine has (/sys/block/vda), that reads zeros and keeps nothing.
		"-drive", "driver=null-co,size=64M,if=virtio",
	}
	if n := c.NIC; n != nil {
		args = append(args, "-netdev", "tap,id=ul,ifname="+n.Tap+",script=no,downscript=no",
			"-device", "virtio-net-pci,netdev=ul,mac="+n.MAC)
	}
	return append(args, c.QEMUArgs...)
}

// bootTime is how long the guest took to start the command: from start to the time the guest
// wrote the results directory's file "started" (its time on the host, set by QEMU's write).
func bootTime(results string, start time.Time) time.Duration {
	st, err := os.Stat(filepath.Join(results, startedFile))
	if err != nil {
		return 0
	}
	return st.ModTime().Sub(start)
}

// follow copies what is added to the file path to w every 200 ms until stop is closed, then the
// rest.
func follow(path string, w io.Writer, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	var off int64
	for {
		select {
		case <-stop:
			copyFrom(path, &off, w)
			return
		case <-time.After(200 * time.Millisecond):
			copyFrom(path, &off, w)
		}
	}
}

func copyFrom(path string, off *int64, w io.Writer) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	n, _ := io.Copy(w, io.NewSectionReader(f, *off, 1<<40))
	*off += n
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
