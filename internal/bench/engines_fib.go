package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/enginehelper"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// mirrorDelays times the FIB reaching 3 engines: 1000 route changes, and (full run) a full
// table.
func (r *runner) mirrorDelays(st *state.Store, name string) error {
	sizes := []int{1000}
	if !r.opt.Quick {
		sizes = append(sizes, FullTable)
	}
	c := enginesCase{engines: 3, dispatch: spec.DispatchFlow}
	for _, n := range sizes {
		if err := setup.DownQuiet(st, name); err != nil {
			return err
		}
		net, err := spec.Parse(name+".yaml", c.topology())
		if err != nil {
			return err
		}
		if _, err := substrate.Up(context.Background(), st, net, "", name+".yaml", r.opt.Substrate); err != nil {
			return err
		}
		rec, err := st.Load(name)
		if err != nil || rec == nil {
			return fmt.Errorf("no record after up (%v)", err)
		}
		m, err := addRoutes(rec.Nodes["nut"], 3, randomPrefixes(n), st, rec.NetID)
		if err != nil {
			return err
		}
		r.logf("   %d routes reached 3 engines %.3fs after the first was made (ip -batch took %.3fs)\n", n, m.Seconds, m.Apply)
		r.rep.EnginesMirror = append(r.rep.EnginesMirror, m)
	}
	return nil
}

// addRoutes adds routes to prefixes (via the sink) in node nut with `ip -batch`, and waits until
// each of its engines has them all.
func addRoutes(nut, nEngines int, prefixes []string, st *state.Store, netID string) (*result.MirrorResult, error) {
	var fes []netns.NsHandle
	if nEngines > 0 {
		found, err := enginehelper.Find(st.ID, netID)
		if err != nil {
			return nil, err
		}
		if fes, err = feHandles(found["nut"].PID, nut); err != nil {
			return nil, err
		}
		defer func() {
			for _, ns := range fes {
				ns.Close()
			}
		}()
		if len(fes) != nEngines {
			return nil, fmt.Errorf("found %d engine namespaces of nut, want %d", len(fes), nEngines)
		}
	}
	var b strings.Builder
	for _, p := range prefixes {
		fmt.Fprintf(&b, "route add %s via 10.8.2.2\n", p)
	}
	cmd, err := noderuntime.Command(nut, "ip", "-batch", "-")
	if err != nil {
		return nil, err
	}
	cmd.Stdin = strings.NewReader(b.String())
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip -batch in nut: %w: %s", err, out)
	}
	m := &result.MirrorResult{Routes: len(prefixes), Engines: nEngines, Apply: time.Since(t0).Seconds()}
	deadline := t0.Add(5 * time.Minute)
	for _, ns := range fes {
		for {
			n, err := bootRoutes(ns)
			if err != nil {
				return nil, err
			}
			if n >= len(prefixes) {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("an engine has %d of %d routes after 5 minutes", n, len(prefixes))
			}
			time.Sleep(min(time.Duration(len(prefixes))*time.Microsecond, 100*time.Millisecond))
		}
	}
	m.Seconds = time.Since(t0).Seconds()
	return m, nil
}

// bootRoutes counts the routes `ip route add` made (protocol boot) in a namespace's main table.
func bootRoutes(ns netns.NsHandle) (int, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return 0, nil // an interrupted dump: count again
	}
	return len(routes), nil
}

// feHandles opens the engine namespaces that helper holds (all it holds but the control node's).
func feHandles(helper, control int) ([]netns.NsHandle, error) {
	own, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", control))
	if err != nil {
		return nil, err
	}
	root, _ := os.Readlink("/proc/1/ns/net")
	fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", helper))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{own: true, root: true}
	var out []netns.NsHandle
	for _, fd := range fds {
		l, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(l, "net:[") || seen[l] {
			continue
		}
		seen[l] = true
		ns, err := netns.GetFromPath(fd)
		if err != nil {
			return nil, err
		}
		out = append(out, ns)
	}
	return out, nil
}
