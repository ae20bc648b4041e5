package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// VMSettings are a VM node's tuning knobs, under its `vm:` key: the knobs of the KVM virtual
// router paper (docs/vm.md). Zero values leave the host's defaults.
type VMSettings struct {
	PinVCPU   []int         `json:",omitempty"` // cores the vCPU threads may run on
	PinIO     []int         `json:",omitempty"` // cores QEMU's I/O threads (main loop, monitor, vhost) may run on
	PrioVCPU  int           `json:",omitempty"` // SCHED_FIFO priority (1-99) of the vCPU threads
	PrioIO    int           `json:",omitempty"` // and of the I/O threads
	Reserve   float64       `json:",omitempty"` // fraction of a core reserved to each vCPU thread (SCHED_DEADLINE)
	Period    time.Duration `json:",omitempty"` // the reservation's period
	Queues    int           `json:",omitempty"` // queue pairs of each virtio-net interface
	QueueSize int           `json:",omitempty"` // descriptors of each receive queue
	// Interconnect is how each virtio-net device meets its port: "" or InterconnectTap (a tap
	// that is the port), InterconnectMacvtap, InterconnectBridge (docs/vm.md).
	Interconnect string `json:",omitempty"`
	// Kernel, Initrd and Append are the user's own kernel and initramfs (absolute paths) and
	// extra kernel command line (vmboot.go). No Initrd: trellis's initramfs with its agent.
	Kernel string `json:",omitempty"`
	Initrd string `json:",omitempty"`
	Append string `json:",omitempty"`
	// Disk is the user's own disk image (absolute path), which the guest boots through its
	// firmware, written to through an overlay (vmboot.go); DiskFormat is its format.
	Disk       string `json:",omitempty"`
	DiskFormat string `json:",omitempty"`
}

// The interconnects of a VM node's ports (`vm: {interconnect: ...}`), the KVM paper's Figure 13.
const (
	InterconnectTap     = "tap"     // the port is a tap that QEMU opens
	InterconnectMacvtap = "macvtap" // the port is a veth whose peer carries a macvtap (passthru)
	InterconnectBridge  = "bridge"  // the port is a veth whose peer shares a bridge with a tap
)

// DefaultReservePeriod is the period of a reservation that names none.
const DefaultReservePeriod = 10 * time.Millisecond

func (p *parser) vmSettings(nd *Node, v *yaml.Node, field string) *VMSettings {
	f, ok := p.fields(v, field, "pin", "priority", "reserve", "queues", "queue_size", "interconnect", "kernel", "initrd", "append", "disk")
	if !ok {
		return nil
	}
	s := &VMSettings{}
	for k, val := range f {
		nd.lines["vm."+k] = val.Line
	}
	if v := f["pin"]; v != nil {
		s.PinVCPU, s.PinIO = p.vmPair(v, field+".pin", p.cores)
	}
	if v := f["priority"]; v != nil {
		one := func(n *yaml.Node, fld string) []int {
			return []int{p.intIn(n, fld, 1, 99, "give a SCHED_FIFO priority from 1 to 99")}
		}
		vc, io := p.vmPair(v, field+".priority", one)
		s.PrioVCPU, s.PrioIO = first(vc), first(io)
	}
	if v := f["reserve"]; v != nil {
		s.Reserve, s.Period = p.reserve(v, field+".reserve")
	}
	if v := f["queues"]; v != nil {
		s.Queues = p.intIn(v, field+".queues", 1, 16, "give 1 to 16 queue pairs")
	}
	if v := f["queue_size"]; v != nil {
		s.QueueSize = p.intIn(v, field+".queue_size", 256, 1024, "give 256, 512 or 1024 (QEMU's sizes)")
		if s.QueueSize&(s.QueueSize-1) != 0 {
			p.fail(v, field+".queue_size", fmt.Sprintf("%d is not a power of two", s.QueueSize), "give 256, 512 or 1024")
		}
	}
	if v := f["interconnect"]; v != nil {
		s.Interconnect = p.interconnect(v, field+".interconnect")
	}
	p.vmBoot(s, f, field)
	return s
}

// interconnect reads tap, macvtap or bridge.
func (p *parser) interconnect(n *yaml.Node, field string) string {
	s, ok := p.str(n, field)
	if !ok {
		return ""
	}
	switch s {
	case InterconnectTap, InterconnectMacvtap, InterconnectBridge:
		return s
	}
	p.fail(n, field, fmt.Sprintf("%q is not an interconnect", s), "give tap, macvtap or bridge")
	return ""
}

func first(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	return xs[0]
}

// vmPair reads `{vcpu: X, io: Y}`, each with read.
func (p *parser) vmPair(v *yaml.Node, field string, read func(*yaml.Node, string) []int) (vcpu, io []int) {
	f, ok := p.fields(v, field, "vcpu", "io")
	if !ok {
		return nil, nil
	}
	if n := f["vcpu"]; n != nil {
		vcpu = read(n, field+".vcpu")
	}
	if n := f["io"]; n != nil {
		io = read(n, field+".io")
	}
	return vcpu, io
}

// cores reads a list of CPU numbers: [0, 1] or a single number.
func (p *parser) cores(n *yaml.Node, field string) []int {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	var out []int
	for _, it := range items {
		if c := p.intIn(it, field, 0, 1023, "give CPU numbers as the kernel counts them, e.g. [0, 1]"); c >= 0 {
			out = append(out, c)
		}
	}
	return out
}

// intIn reads an integer from lo to hi; -1 if it is not one (the problem is recorded).
func (p *parser) intIn(n *yaml.Node, field string, lo, hi int, fix string) int {
	s, ok := p.str(n, field)
	if !ok {
		return -1
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		p.fail(n, field, fmt.Sprintf("%q is not a whole number from %d to %d", s, lo, hi), fix)
		return -1
	}
	return v
}

// reserve reads `50%` or `50% 20ms`: the share of a core and the period.
func (p *parser) reserve(n *yaml.Node, field string) (float64, time.Duration) {
	s, ok := p.str(n, field)
	if !ok {
		return 0, 0
	}
	const fix = "write a share of a core with an optional period, e.g. `50%` or `35% 20ms`"
	parts := strings.Fields(s)
	if len(parts) == 0 || len(parts) > 2 || !strings.HasSuffix(parts[0], "%") {
		p.fail(n, field, fmt.Sprintf("%q is not a reservation", s), fix)
		return 0, 0
	}
	pct, err := strconv.ParseFloat(strings.TrimSuffix(parts[0], "%"), 64)
	if err != nil || pct <= 0 || pct > 100 {
		p.fail(n, field, fmt.Sprintf("%q is not a share from 0 to 100%%", parts[0]), fix)
		return 0, 0
	}
	period := DefaultReservePeriod
	if len(parts) == 2 {
		period, err = time.ParseDuration(parts[1])
		if err != nil || period < time.Millisecond || period > time.Second {
			p.fail(n, field, fmt.Sprintf("%q is not a period from 1ms to 1s", parts[1]), fix)
			return 0, 0
		}
	}
	return pct / 100, period
}
