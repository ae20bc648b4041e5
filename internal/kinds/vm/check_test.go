package vm

import (
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/spec"
	"golang.org/x/sys/unix"
)

func TestCheck(t *testing.T) {
	hostMemory = func() uint64 { return 4 << 30 }
	hostCPUs = func() (set unix.CPUSet) {
		set.Set(0)
		set.Set(1)
		return set
	}
	cases := []struct {
		name, file, want string
	}{
		{"defaults", "name: n\nnodes:\n  v:\n    kind: vm\n", ""},
		{"enough", "name: n\nnodes:\n  v:\n    kind: vm\n    memory: 512M\n", ""},
		{"too little", "name: n\nnodes:\n  v:\n    kind: vm\n    memory: 64M\n", "t.yaml:5: nodes.v.memory: 64 MiB is too little for a VM node; give a VM at least 320M"},
		{"more than the host", "name: n\nnodes:\n  v:\n    kind: vm\n    memory: 8G\n", "t.yaml:5: nodes.v.memory: 8192 MiB is more than this machine has (4096 MiB); give the VM less memory"},
		{"knobs", "name: n\nnodes:\n  v:\n    kind: vm\n    vm:\n      pin: {io: 0}\n      priority: {io: 5}\n      reserve: 40% 20ms\n", ""},
		{"pinned and reserved: a quota", "name: n\nnodes:\n  v:\n    kind: vm\n    vm:\n      pin: {vcpu: 1}\n      reserve: 40%\n", ""},
		{"a quota under 1ms", "name: n\nnodes:\n  v:\n    kind: vm\n    vm:\n      pin: {vcpu: 1}\n      reserve: 40% 2ms\n", "t.yaml:7: nodes.v.vm.reserve: with pinned vCPUs the reservation is a CPU quota, and this one is under 1ms a period; give a larger share or a longer period"},
		{"a quota of two vCPUs", "name: n\nnodes:\n  v:\n    kind: vm\n    cpu: 2\n    vm:\n      pin: {vcpu: 1}\n      reserve: 40% 2ms\n", ""},
		{"a core the host lacks", "name: n\nnodes:\n  v:\n    kind: vm\n    vm:\n      pin: {vcpu: [1, 2]}\n", "t.yaml:6: nodes.v.vm.pin: this machine has no CPU 2 (it has 0-1); pin to CPUs the machine has"},
		{"priority and reserve", "name: n\nnodes:\n  v:\n    kind: vm\n    vm:\n      priority: {vcpu: 5}\n      reserve: 40%\n", "t.yaml:7: nodes.v.vm.reserve: the vCPU threads have a priority too"},
		{"engines", "name: n\nnodes:\n  v:\n    kind: vm\n    engines: 2\n    memory: 1G\n", ""},
		{"engines over the host's memory", "name: n\nnodes:\n  v:\n    kind: vm\n    memory: 1G\n    engines: 4\n", "t.yaml:6: nodes.v.engines: 5 VMs of 1024 MiB (the node's and its 4 engines') are more than this machine has (4096 MiB); give fewer engines"},
		{"no engines", "name: n\nnodes:\n  v:\n    kind: vm\n    engines: 0\n", "t.yaml:5: nodes.v.engines: \"0\" is not a number of engines"},
		{"negative engines", "name: n\nnodes:\n  v:\n    kind: vm\n    engines: -2\n", "t.yaml:5: nodes.v.engines: \"-2\" is not a number of engines"},
		{"engines with macvtap", "name: n\nnodes:\n  v:\n    kind: vm\n    engines: 2\n    vm: {interconnect: macvtap}\n", "t.yaml:6: nodes.v.vm.interconnect: engines on a VM node need the tap interconnect, not macvtap; remove interconnect"},
		{"engines with exec: mirrored", "name: n\nnodes:\n  v:\n    kind: vm\n    engines: 2\n    memory: 1G\n    exec: [bird]\n", ""},
		{"engine with cpus", "name: n\nnodes:\n  v:\n    kind: vm\n    engines: [{}, {cpus: 1}]\n", "t.yaml:5: nodes.v.engines[1].cpus: an engine VM takes its cores from the node's vm.pin"},
		{"on another host", "name: n\nhosts:\n  m1: {address: 198.18.0.1}\n  m2: {address: 198.18.0.2}\nnodes:\n  v:\n    kind: vm\n    memory: 8G\n    host: m2\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := spec.Parse("t.yaml", []byte(c.file))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("Parse: %q, want %q", got, c.want)
			}
		})
	}
}

func TestIsQEMUComm(t *testing.T) {
	for _, tt := range []struct {
		comm string
		want bool
	}{
		{"qemu-system-x86\n", true}, // the kernel keeps 15 bytes of qemu-system-x86_64
		{"qemu-system-x86", true},
		{"qemu-system-arm\n", false},
		{"4\n", false},
		{"trellis\n", false},
		{"\n", false},
	} {
		if got := isQEMUComm([]byte(tt.comm)); got != tt.want {
			t.Errorf("isQEMUComm(%q) = %v, want %v", tt.comm, got, tt.want)
		}
	}
}
