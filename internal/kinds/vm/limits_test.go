package vm

import (
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"golang.org/x/sys/unix"
)

func TestLimits(t *testing.T) {
	hostCPUs = func() (set unix.CPUSet) {
		set.Set(0)
		set.Set(1)
		return set
	}
	const mib = 1 << 20
	cases := []struct {
		name  string
		node  spec.Node
		accel string
		want  cgroup.Limits
		note  string
	}{
		{"defaults under KVM", spec.Node{}, "kvm", cgroup.Limits{Memory: 640 * mib}, ""},
		{"defaults under TCG: the translation buffer", spec.Node{}, "tcg", cgroup.Limits{Memory: 768 * mib}, ""},
		{"cpu as a quota, memory, pids",
			spec.Node{Needs: spec.Capacity{CPU: 0.5, Memory: 1024 * mib}, Pids: 64}, "kvm",
			cgroup.Limits{CPUs: 0.5, Memory: 1152 * mib, Pids: 64}, ""},
		{"more vCPUs than cores: a quota of all of them",
			spec.Node{Needs: spec.Capacity{CPU: 4}}, "kvm", cgroup.Limits{CPUs: 2, Memory: 640 * mib}, ""},
		{"reserve without pinning: SCHED_DEADLINE, no quota",
			spec.Node{Settings: spec.NewKindSettings(&Settings{Reserve: 0.5, Period: 10 * time.Millisecond})}, "kvm", cgroup.Limits{Memory: 640 * mib}, ""},
		{"reserve of pinned vCPUs: a quota over the period",
			spec.Node{Needs: spec.Capacity{CPU: 2}, Settings: spec.NewKindSettings(&Settings{PinVCPU: []int{1}, Reserve: 0.5, Period: 20 * time.Millisecond})}, "kvm",
			cgroup.Limits{CPUs: 1, Period: 20 * time.Millisecond, Memory: 640 * mib}, "cgroup CPU quota 20ms per 20ms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := limits(&c.node, c.accel); got != c.want {
				t.Errorf("limits = %+v, want %+v", got, c.want)
			}
			note := quotaNote(&plan.Node{Node: &c.node})
			if (c.note == "") != (note == "") || !strings.Contains(note, c.note) {
				t.Errorf("inspect's note %q, want one with %q", note, c.note)
			}
		})
	}
}
