package substrate

import (
	"errors"
	"fmt"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// ErrNotDirect is returned for the direct-link counters of a link that has ports.
var ErrNotDirect = errors.New("not a direct link")

// DirectImpairCounters reads the counters of the impairment of what endpoint i of direct link
// l (no port) sends: its program is on the tcx ingress of the other end, in the namespace of
// that end's node, whose process is pid (kinds/veth).
func DirectImpairCounters(l *plan.Link, i, pid int) (dataplane.ImpairCounters, error) {
	var c dataplane.ImpairCounters
	if !Wired(l) || len(l.Ports) != 2 || i < 0 || i > 1 {
		return c, fmt.Errorf("link %s: %w", l.Name, ErrNotDirect)
	}
	other := l.Ports[1-i]
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return c, fmt.Errorf("link %s: namespace of %s: %w", l.Name, other.Node, err)
	}
	defer ns.Close()
	err = netnsutil.Do(ns, func() error {
		end, err := netlink.LinkByName(other.Ifname)
		if err != nil {
			return err
		}
		c, err = dataplane.ReadImpairCounters(end.Attrs().Index)
		return err
	})
	if err != nil {
		return c, fmt.Errorf("link %s: %s: %w", l.Name, other, err)
	}
	return c, nil
}

// directImpairCounters fills in the impairment counters of the impaired endpoints of li,
// direct link l; pids are the running nodes' processes by name. An endpoint whose other end's
// node is not running, or whose program is not there, keeps none.
func directImpairCounters(l *plan.Link, li *LinkInfo, pids map[string]int) {
	if !Wired(l) || len(l.Ports) != 2 || len(li.Endpoints) != 2 {
		return
	}
	for i, p := range l.Ports {
		if pid := pids[l.Ports[1-i].Node]; !p.Impair.IsZero() && pid != 0 {
			if c, err := DirectImpairCounters(l, i, pid); err == nil {
				ei := &li.Endpoints[i]
				ei.ImpairDrops, ei.Duplicated, ei.Corrupted = c.Dropped, c.Duplicated, c.Corrupted
			}
		}
	}
}
