package vm

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/spec"
	"gopkg.in/yaml.v3"
)

// The kind's own settings, under a node's `vm:` key (spec/settings.go): read here, checked by
// check, kept by the spec layer as an opaque value that knobs gives back.
var nodeSettings = &spec.NodeSettings{
	Key:  "vm",
	What: "VM settings",
	Parse: func(r *spec.Reader, v *yaml.Node) spec.Settings {
		if s := readSettings(r, v); s != nil {
			return s
		}
		return nil // not a typed nil: the node has no settings
	},
	New: func() spec.Settings { return &Settings{} },
}

// knobs returns the VM settings of node nd, or nil.
func knobs(nd *spec.Node) *Settings {
	s, _ := nd.KindSettings().(*Settings)
	return s
}

// Settings are a VM node's tuning knobs, under its `vm:` key: the knobs of the KVM virtual
// router paper (docs/vm.md). Zero values leave the host's defaults. Their JSON is part of the
// node's digest (plan.Digest): a field added must be `omitempty`, or every running VM restarts.
type Settings struct {
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
	// extra kernel command line (settings_boot.go). No Initrd: trellis's initramfs with its agent.
	Kernel string `json:",omitempty"`
	Initrd string `json:",omitempty"`
	Append string `json:",omitempty"`
	// Disk is the user's own disk image (absolute path), which the guest boots through its
	// firmware, written to through an overlay (settings_boot.go); DiskFormat is its format.
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

// readSettings reads `vm:`; nil if it is not a mapping.
func readSettings(p *spec.Reader, v *yaml.Node) *Settings {
	field := p.Field
	f, ok := p.Fields(v, field, "pin", "priority", "reserve", "queues", "queue_size", "interconnect", "kernel", "initrd", "append", "disk")
	if !ok {
		return nil
	}
	s := &Settings{}
	for k, val := range f {
		p.Line("vm."+k, val.Line)
	}
	if v := f["pin"]; v != nil {
		s.PinVCPU, s.PinIO = vmPair(p, v, field+".pin", cores)
	}
	if v := f["priority"]; v != nil {
		one := func(p *spec.Reader, n *yaml.Node, fld string) []int {
			return []int{intIn(p, n, fld, 1, 99, "give a SCHED_FIFO priority from 1 to 99")}
		}
		vc, io := vmPair(p, v, field+".priority", one)
		s.PrioVCPU, s.PrioIO = first(vc), first(io)
	}
	if v := f["reserve"]; v != nil {
		s.Reserve, s.Period = reserve(p, v, field+".reserve")
	}
	if v := f["queues"]; v != nil {
		s.Queues = intIn(p, v, field+".queues", 1, 16, "give 1 to 16 queue pairs")
	}
	if v := f["queue_size"]; v != nil {
		s.QueueSize = intIn(p, v, field+".queue_size", 256, 1024, "give 256, 512 or 1024 (QEMU's sizes)")
		if s.QueueSize&(s.QueueSize-1) != 0 {
			p.Fail(v, field+".queue_size", fmt.Sprintf("%d is not a power of two", s.QueueSize), "give 256, 512 or 1024")
		}
	}
	if v := f["interconnect"]; v != nil {
		s.Interconnect = interconnectOf(p, v, field+".interconnect")
	}
	readBoot(p, s, f, field)
	if !s.Agent() {
		refuseAgentKeys(p)
	}
	return s
}

// interconnectOf reads tap, macvtap or bridge.
func interconnectOf(p *spec.Reader, n *yaml.Node, field string) string {
	s, ok := p.Str(n, field)
	if !ok {
		return ""
	}
	switch s {
	case InterconnectTap, InterconnectMacvtap, InterconnectBridge:
		return s
	}
	p.Fail(n, field, fmt.Sprintf("%q is not an interconnect", s), "give tap, macvtap or bridge")
	return ""
}

func first(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	return xs[0]
}

// vmPair reads `{vcpu: X, io: Y}`, each with read.
func vmPair(p *spec.Reader, v *yaml.Node, field string, read func(*spec.Reader, *yaml.Node, string) []int) (vcpu, io []int) {
	f, ok := p.Fields(v, field, "vcpu", "io")
	if !ok {
		return nil, nil
	}
	if n := f["vcpu"]; n != nil {
		vcpu = read(p, n, field+".vcpu")
	}
	if n := f["io"]; n != nil {
		io = read(p, n, field+".io")
	}
	return vcpu, io
}

// cores reads a list of CPU numbers: [0, 1] or a single number.
func cores(p *spec.Reader, n *yaml.Node, field string) []int {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	var out []int
	for _, it := range items {
		if c := intIn(p, it, field, 0, 1023, "give CPU numbers as the kernel counts them, e.g. [0, 1]"); c >= 0 {
			out = append(out, c)
		}
	}
	return out
}

// intIn reads an integer from lo to hi; -1 if it is not one (the problem is recorded).
func intIn(p *spec.Reader, n *yaml.Node, field string, lo, hi int, fix string) int {
	s, ok := p.Str(n, field)
	if !ok {
		return -1
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		p.Fail(n, field, fmt.Sprintf("%q is not a whole number from %d to %d", s, lo, hi), fix)
		return -1
	}
	return v
}

// reserve reads `50%` or `50% 20ms`: the share of a core and the period.
func reserve(p *spec.Reader, n *yaml.Node, field string) (float64, time.Duration) {
	s, ok := p.Str(n, field)
	if !ok {
		return 0, 0
	}
	const fix = "write a share of a core with an optional period, e.g. `50%` or `35% 20ms`"
	parts := strings.Fields(s)
	if len(parts) == 0 || len(parts) > 2 || !strings.HasSuffix(parts[0], "%") {
		p.Fail(n, field, fmt.Sprintf("%q is not a reservation", s), fix)
		return 0, 0
	}
	pct, err := strconv.ParseFloat(strings.TrimSuffix(parts[0], "%"), 64)
	if err != nil || pct <= 0 || pct > 100 {
		p.Fail(n, field, fmt.Sprintf("%q is not a share from 0 to 100%%", parts[0]), fix)
		return 0, 0
	}
	period := DefaultReservePeriod
	if len(parts) == 2 {
		period, err = time.ParseDuration(parts[1])
		if err != nil || period < time.Millisecond || period > time.Second {
			p.Fail(n, field, fmt.Sprintf("%q is not a period from 1ms to 1s", parts[1]), fix)
			return 0, 0
		}
	}
	return pct / 100, period
}
