package vm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// QEMU is the emulator trellis runs.
const QEMU = "qemu-system-x86_64"

// markerPrefix starts the guest name of every VM node's QEMU: trellis finds its VMs by it.
const markerPrefix = "trellis-vm/"

// marker names a VM node's QEMU process (its -name guest=...), as the container kind's marker
// names a node's init.
func marker(stateID, netID, node, digest string) string {
	return markerPrefix + strings.Join([]string{stateID, netID, node, digest}, "/")
}

// socket is the abstract unix socket name of a VM's agent port ("agent"), terminal port
// ("tty"), route mirror port ("mirror", named so by engines.MirrorSocket too) or monitor ("qmp").
// Abstract sockets vanish with QEMU: nothing is left in the file system after a crash.
func socket(stateID, netID, node, what string) string {
	return "trellis-vm/" + stateID + "/" + netID + "/" + node + "/" + what
}

var (
	accelOnce sync.Once
	accel     string
)

// Accel returns "kvm" if this machine starts a KVM guest, else "tcg" (software emulation).
// It asks by making one with the host's CPU model, as /dev/kvm may exist and still not work
// (in a nested VM, KVM may open but refuse the guest's CPU state).
func Accel() string {
	accelOnce.Do(func() {
		accel = "tcg"
		c := exec.Command(QEMU, "-accel", "kvm", "-machine", "pc", "-cpu", "host", "-m", "32", "-S",
			"-display", "none", "-nodefaults", "-no-user-config", "-monitor", "stdio")
		c.Stdin = strings.NewReader("quit\n")
		if c.Run() == nil {
			accel = "kvm"
		}
	})
	return accel
}

// vhostNet says whether ports may use vhost-net (the kernel's virtio-net back end).
func vhostNet() bool {
	f, err := os.OpenFile("/dev/vhost-net", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// vmPort is a virtual interface of a VM: a virtio-net device whose port, in the substrate, is
// a tap that QEMU makes or (other interconnects) a veth that leads to QEMU (wire.go).
type vmPort struct {
	plan.Port
	MTU          int
	Queues       int    // queue pairs (multiqueue virtio-net), 0 = one
	QueueSize    int    // receive queue size, 0 = QEMU's
	Interconnect string // spec.InterconnectTap, ...Macvtap or ...Bridge
	files        []*os.File
}

func newPort(p plan.Port, mtu int, s *spec.VMSettings) vmPort {
	vp := vmPort{Port: p, MTU: mtu, Interconnect: interconnect(s)}
	if s != nil {
		vp.Queues, vp.QueueSize = s.Queues, s.QueueSize
	}
	return vp
}

// args returns QEMU's command line for node n, whose sockets sock names (socket's what).
func args(img image.Image, mark string, sock func(what string) string, consoleLog string, n *plan.Node, ports []vmPort) []string {
	accel := Accel()
	if accel == "tcg" { // a bounded translation buffer, counted in the VM's memory limit
		accel += ",tb-size=" + strconv.Itoa(tcgBufferMiB)
	}
	a := []string{
		"-name", "guest=" + mark + ",debug-threads=on",
		"-accel", accel, "-machine", "pc", "-cpu", map[string]string{"kvm": "host", "tcg": "max"}[Accel()],
		"-m", strconv.FormatUint(guestMemory(n.Node)>>20, 10), "-smp", strconv.Itoa(vcpus(n.Node)),
		// Paused until QEMU is in its control group (launch), so that the group counts the guest.
		"-S", "-display", "none", "-nodefaults", "-no-user-config", "-no-reboot", "-daemonize",
	}
	a = append(a, boot(img, n.Name, n.VM)...)
	a = append(a,
		"-serial", "file:"+consoleLog,
		"-chardev", "socket,id=agent,path="+sock("agent")+",abstract=on,server=on,wait=off",
		"-device", "virtio-serial-pci", "-device", "virtserialport,chardev=agent,name="+guest.PortName,
		"-chardev", "socket,id=tty,path="+sock("tty")+",abstract=on,server=on,wait=off",
		"-device", "virtserialport,chardev=tty,name="+guest.TTYPortName,
		"-chardev", "socket,id=mirror,path="+sock("mirror")+",abstract=on,server=on,wait=off",
		"-device", "virtserialport,chardev=mirror,name="+guest.MirrorPortName,
		"-chardev", "socket,id=qmp,path="+sock("qmp")+",abstract=on,server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
	)
	fd := 3 // the first of the files QEMU gets (launch)
	for _, p := range ports {
		var fds []string
		for range p.files {
			fds = append(fds, strconv.Itoa(fd))
			fd++
		}
		netdev, dev := p.qemuDevices(fds)
		a = append(a, "-netdev", netdev, "-device", dev)
	}
	return a
}

// boot returns the -kernel, -initrd and -append options: trellis's image, or the user's own
// kernel (with trellis's initramfs unless they give theirs) and extra command line; none for a
// VM that boots its own disk.
func boot(img image.Image, node string, s *spec.VMSettings) []string {
	if s != nil && s.Disk != "" { // the disk's own boot loader and kernel (diskArgs)
		return nil
	}
	kernel, initrd, extra := img.Kernel, img.Initrd, ""
	if s != nil {
		if s.Kernel != "" {
			kernel = s.Kernel
		}
		if s.Initrd != "" {
			initrd = s.Initrd
		}
		extra = s.Append
	}
	cmdline := "console=ttyS0 panic=-1 quiet trellis.node=" + node
	if extra != "" {
		cmdline += " " + extra
	}
	return []string{"-kernel", kernel, "-initrd", initrd, "-append", cmdline}
}

// tapName is the name of the tap QEMU makes for a port: the port itself, or with the bridge
// interconnect a tap beside it.
func (p vmPort) tapName() string {
	if p.Interconnect == spec.InterconnectBridge {
		return wireName(p.Name, guestLetter)
	}
	return p.Name
}

// qemuDevices returns the -netdev and -device options of a port. A macvtap's queues are the
// open files fds (their numbers in QEMU, or names given to its monitor).
func (p vmPort) qemuDevices(fds []string) (netdev, device string) {
	switch {
	case p.Interconnect == spec.InterconnectMacvtap && len(fds) == 1:
		netdev = fmt.Sprintf("tap,id=%s,fd=%s", p.Name, fds[0])
	case p.Interconnect == spec.InterconnectMacvtap:
		netdev = fmt.Sprintf("tap,id=%s,fds=%s", p.Name, strings.Join(fds, ":"))
	default:
		netdev = fmt.Sprintf("tap,id=%s,ifname=%s,script=no,downscript=no", p.Name, p.tapName())
		if p.Queues > 1 {
			netdev += fmt.Sprintf(",queues=%d", p.Queues)
		}
	}
	if vhostNet() {
		netdev += ",vhost=on"
	}
	device = fmt.Sprintf("virtio-net-pci,netdev=%s,mac=%s,id=%s", p.Name, p.MAC, deviceID(p.Ifname))
	if p.MTU > 0 {
		device += fmt.Sprintf(",host_mtu=%d", p.MTU)
	}
	if p.Queues > 1 { // a vector per queue, plus configuration and control
		device += fmt.Sprintf(",mq=on,vectors=%d", 2*p.Queues+2)
	}
	if p.QueueSize > 0 {
		device += fmt.Sprintf(",rx_queue_size=%d", p.QueueSize)
	}
	return netdev, device
}

func deviceID(ifname string) string { return "nic-" + ifname }

// launch starts QEMU, which daemonizes once the VM is made, puts it in its control group g
// (nil: none), starts the guest, and returns QEMU's pid. QEMU gets files as its descriptors
// 3, 4, ...
func launch(ctx context.Context, argv []string, pidfile, qmpSocket string, files []*os.File, g *cgroup.Group) (int, error) {
	defer os.Remove(pidfile)
	c := exec.CommandContext(ctx, QEMU, append(argv, "-pidfile", pidfile)...)
	c.ExtraFiles = files
	if g != nil {
		fd, err := g.FD()
		if err != nil {
			return 0, err
		}
		if fd != nil { // cgroup v2: QEMU starts in its group
			defer fd.Close()
			c.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
		}
	}
	if out, err := c.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%s: %v: %s", QEMU, err, strings.TrimSpace(string(out)))
	}
	data, err := os.ReadFile(pidfile)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, err
	}
	if g != nil {
		if err := g.Place(pid); err != nil {
			return pid, fmt.Errorf("QEMU into its cgroup: %w", err)
		}
	}
	m, err := dialQMP(ctx, qmpSocket)
	if err != nil {
		return pid, err
	}
	defer m.Close()
	_, err = m.execute(ctx, "cont", nil)
	return pid, err
}
