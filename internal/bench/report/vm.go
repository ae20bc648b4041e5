package report

import (
	"fmt"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
)

func vmSection(b *strings.Builder, rep *result.Report, _ string) {
	v := rep.VM
	if v == nil {
		return
	}
	b.WriteString("## VM nodes\n\n")
	if v.Functional {
		fmt.Fprintf(b, `**Functional only:** KVM does not work on this machine, so VM nodes ran under software
emulation (%s); the rates show that frames cross a VM node under each setting, not what a
VM router forwards with KVM.

`, v.Accel)
	}
	fmt.Fprintf(b, `A VM node running BIRD booted to BIRD answering in the guest in %s s (from the start of
`+"`up`"+`). Below, the setup vm-tap (source and sink containers, the node under test a VM whose
interfaces are virtio-net on taps, joined by the shortbridge) with each setting of the node's
`+"`vm:`"+` knobs (the KVM paper's figures 2-4): the peak forwarding rate, its ratio to the
VM's defaults, and the cores QEMU's vCPU threads and I/O threads (main loop, I/O and vhost
threads) used while the generator offered all it could.

`, ms(v.BootSeconds, 1, 1))
	b.WriteString("| setting | `vm:` | peak (kpps) | ratio to defaults | vCPU threads (cores) | I/O threads (cores) |\n|---|---|---|---|---|---|\n")
	for _, k := range v.Knobs {
		ratio := "–"
		if k.PeakRatio != nil {
			ratio = ms(*k.PeakRatio, 1, 2)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %.2f | %.2f |\n", k.Knob, code(k.Settings), ms(k.Peak, 1000, 1), ratio, k.CPU["vcpu"], k.CPU["io"])
	}
	b.WriteString("\n")
}
