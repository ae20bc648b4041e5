package substrate

import (
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// kernelErrors refuses what the plan needs of the kernel that this machine's lacks: the port
// hook asked for in opt.Dataplane (tcx: Linux 6.6), and corruption (Linux 6.2). Each error
// names the feature, the kernel found and the one needed (the table under README.md's requirements).
func kernelErrors(p *plan.Plan, n *spec.Network, opt Options) spec.Errors {
	var errs spec.Errors
	if len(p.Links) > 0 {
		if _, err := opt.Dataplane.Hook(); err != nil {
			errs = append(errs, n.NetworkError("links", err.Error()+" (kernel "+dataplane.KernelRelease()+")",
				"use clsact (the default: unset "+dataplane.HookEnv+"), which every supported kernel has"))
		}
	}
	said := map[string]bool{}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Impair.Corrupt == 0 {
				continue
			}
			err := dataplane.CheckCorrupt()
			if err == nil {
				return errs // the kernel has it: every other link's corruption works too
			}
			sl := specLink(n, l.Name)
			field := "corrupt"
			if f, ok := sl.From[port.String()]; ok && f.Corrupt > 0 {
				field = "from." + port.String()
			}
			if !said[l.Name+" "+field] {
				said[l.Name+" "+field] = true
				errs = append(errs, n.LinkError(sl, field, err.Error(),
					"remove corrupt from this link (loss and duplicate work on this kernel), or run Linux 6.2 or later"))
			}
		}
	}
	return errs
}
