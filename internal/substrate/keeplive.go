package substrate

import (
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
)

// liveOf is the plan whose live state a record holds: the target of a change under way (it
// was recorded with the change's file), else what was last applied.
func liveOf(rec *state.Record) *plan.Plan {
	if rec.Target != nil {
		return rec.Target
	}
	return rec.Plan
}

// keepLive gives plan p the state that can be set live on a running network (SetLinkState,
// SetImpairment) as plan was holds it: each link's carrier, and each endpoint's carrier and
// impairment. Links and endpoints that was has not keep p's.
func keepLive(p, was *plan.Plan) {
	if was == nil {
		return
	}
	for _, l := range p.Links {
		old := was.Link(l.Name)
		if old == nil {
			continue
		}
		l.Down = old.Down
		for i := range l.Ports {
			for _, op := range old.Ports {
				if op.Node == l.Ports[i].Node && op.Ifname == l.Ports[i].Ifname {
					l.Ports[i].Down, l.Ports[i].Impair = op.Down, op.Impair
				}
			}
		}
	}
}
