package enginehelper

import (
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/spec"
)

// TableLive is Table over the engines that are up (live[i]), with the engines' own indexes in
// the slots: an engine that is down gets no frames, and the others share its part as the
// dispatch says. With none up, every frame goes to the node itself.
func TableLive(d spec.Dispatch, engines []spec.Engine, live []bool) (dataplane.EnginesConfig, error) {
	var up []spec.Engine
	var index []uint32
	for i, e := range engines {
		if i < len(live) && live[i] {
			up = append(up, e)
			index = append(index, uint32(i))
		}
	}
	if len(up) == 0 {
		c, err := Table(d, engines)
		c.Slots = nil
		return c, err
	}
	c, err := Table(d, up)
	if err != nil {
		return c, err
	}
	for i, s := range c.Slots {
		c.Slots[i] = index[s]
	}
	c.FEs = len(engines)
	return c, nil
}
