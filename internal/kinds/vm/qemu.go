package vm

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/trellisnet/trellis/internal/guest"
	"github.com/trellisnet/trellis/internal/image"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/vmsock"
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

// sandbox is QEMU's seccomp filter (-sandbox): no obsolete system calls, no new processes or
// programs, no changing its own scheduling (trellis pins and prioritises QEMU's threads from
// outside, tune.go). elevateprivileges stays allowed: QEMU 7.2 (Debian 12) installs the filter
// before it drops to -runas's uid, and would be killed at its setgid; once dropped, with no
// capability left, set*id cannot take root back.
const sandbox = "on,obsolete=deny,spawn=deny,resourcecontrol=deny"

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

// vmPort is a virtual interface of a VM: a virtio-net device whose port, in the substrate, is
// a tap or (other interconnects) a veth that leads to QEMU (wire.go).
type vmPort struct {
	plan.Port
	MTU          int
	Queues       int        // queue pairs (multiqueue virtio-net), 0 = one
	QueueSize    int        // receive queue size, 0 = QEMU's
	Interconnect string     // InterconnectTap, ...Macvtap or ...Bridge
	files        []*os.File // the queues of its tap or macvtap, one per queue pair (wire)
	vhost        []*os.File // its vhost-net devices, one per queue pair, if the host has them
}

func newPort(p plan.Port, mtu int, s *Settings) vmPort {
	vp := vmPort{Port: p, MTU: mtu, Interconnect: interconnect(s)}
	if s != nil {
		vp.Queues, vp.QueueSize = s.Queues, s.QueueSize
	}
	return vp
}

// args returns QEMU's command line for node n, whose sockets sock names (socket's what), run
// as runAs ("UID:GID") once it has opened its files, devices and sockets.
func args(img image.Image, mark, runAs string, sock func(what string) string, consoleLog string, n *plan.Node, ports []vmPort) []string {
	accel := Accel()
	if accel == "tcg" { // a bounded translation buffer, counted in the VM's memory limit
		accel += ",tb-size=" + strconv.Itoa(tcgBufferMiB)
	}
	a := []string{
		"-name", "guest=" + mark + ",debug-threads=on",
		"-accel", accel, "-machine", "pc", "-cpu", map[string]string{"kvm": "host", "tcg": "max"}[Accel()],
		"-m", strconv.FormatUint(guestMemory(n.Node)>>20, 10), "-smp", strconv.Itoa(vcpus(n.Node)),
		// Paused until QEMU is in its control group (launch), so that the group counts the guest.
		"-S", "-display", "none", "-nodefaults", "-no-user-config", "-no-reboot",
		"-sandbox", sandbox, "-runas", runAs,
	}
	a = append(a, boot(img, n.Name, knobs(n.Node))...)
	a = append(a,
		"-serial", "file:"+consoleLog,
		"-chardev", "socket,id=agent,path="+sock(vmsock.Agent)+",server=on,wait=off",
		"-device", "virtio-serial-pci", "-device", "virtserialport,chardev=agent,name="+guest.PortName,
		"-chardev", "socket,id=tty,path="+sock(vmsock.TTY)+",server=on,wait=off",
		"-device", "virtserialport,chardev=tty,name="+guest.TTYPortName,
		"-chardev", "socket,id=mirror,path="+sock(vmsock.Mirror)+",server=on,wait=off",
		"-device", "virtserialport,chardev=mirror,name="+guest.MirrorPortName,
		"-chardev", "socket,id=qmp,path="+sock(vmsock.Monitor)+",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
	)
	fd := 3 // the first of the files QEMU gets (launch)
	number := func(files []*os.File) []string {
		var fds []string
		for range files {
			fds = append(fds, strconv.Itoa(fd))
			fd++
		}
		return fds
	}
	for _, p := range ports {
		netdev, dev := p.qemuDevices(number(p.files), number(p.vhost))
		a = append(a, "-netdev", netdev, "-device", dev)
	}
	return a
}

// boot returns the -kernel, -initrd and -append options: trellis's image, or the user's own
// kernel (with trellis's initramfs unless they give theirs) and extra command line; none for a
// VM that boots its own disk.
func boot(img image.Image, node string, s *Settings) []string {
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

// tapName is the name of the tap trellis makes for a port: the port itself, or with the bridge
// interconnect a tap beside it.
func (p vmPort) tapName() string {
	if p.Interconnect == InterconnectBridge {
		return wireName(p.Name, guestLetter)
	}
	return p.Name
}

// qemuDevices returns the -netdev and -device options of a port, whose tap or macvtap queues
// and vhost-net devices are the open files fds and vhost (their numbers in QEMU, or names
// given to its monitor): QEMU opens no device of its own, as it may not once it runs as its
// unprivileged uid (a port hot-plugged).
func (p vmPort) qemuDevices(fds, vhost []string) (netdev, device string) {
	netdev = fmt.Sprintf("tap,id=%s,%s", p.Name, fdOption("fd", fds))
	if len(vhost) > 0 {
		netdev += ",vhost=on," + fdOption("vhostfd", vhost)
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

// fdOption is QEMU's option for one file (name=fd) or several (names=fd1:fd2).
func fdOption(name string, fds []string) string {
	if len(fds) == 1 {
		return name + "=" + fds[0]
	}
	return name + "s=" + strings.Join(fds, ":")
}

func deviceID(ifname string) string { return "nic-" + ifname }
