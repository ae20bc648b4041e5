//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
)

// tcxPrograms counts the programs on the tcx ingress of port (where its network's ports are);
// ok is false on a kernel without tcx.
func tcxPrograms(t *testing.T, port string) (n int, ok bool) {
	t.Helper()
	var res *link.QueryResult
	var qerr error
	err := inPortsOf(t, port, func() error {
		l, err := netlink.LinkByName(port)
		if err != nil {
			return err
		}
		res, qerr = link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: ebpf.AttachTCXIngress})
		return nil
	})
	if err != nil {
		t.Fatalf("port %s: %v", port, err)
	}
	if qerr != nil {
		return 0, false
	}
	return len(res.Programs), true
}

// TestPortHookFlag: the port hook is a value from the command line down to the data plane:
// --port-hook tcx puts a shortbridge's programs on its ports' tcx ingress, the default
// (clsact) puts none there, and a hook that is no hook is refused naming the flag, with
// nothing made. Main (6d36b5a) had no flag: the hook came from TRELLIS_PORT_HOOK, read once
// deep in the data plane.
func TestPortHookFlag(t *testing.T) {
	e := start(t)
	path := writeTopo(t, rateTopo("hook", "    connector: shortbridge\n"))
	_, errOut, err := trellis(t, e.state, "--port-hook", "netkit", "up", path)
	if err == nil || !strings.Contains(errOut, "--port-hook") || !strings.Contains(errOut, `"netkit"`) {
		t.Errorf("up with --port-hook netkit: err %v, stderr %q; want a refusal naming --port-hook and the value", err, errOut)
	}
	e.assertClean()
	for _, c := range []struct {
		args []string
		tcx  bool // the programs are on tcx
	}{{[]string{"up", path}, false}, {[]string{"--port-hook", "tcx", "up", path}, true}} {
		mustTrellis(t, e.state, c.args...)
		for _, ep := range inspect(t, e.state, "hook").link(t, "a:eth1--b:eth1").Endpoints {
			n, has := tcxPrograms(t, ep.Port)
			if !has {
				t.Logf("this kernel has no tcx (Linux 6.6): only the default hook is checked")
				break
			}
			if (n > 0) != c.tcx {
				t.Errorf("trellis %s: port %s has %d programs on its tcx ingress; want them there: %v", strings.Join(c.args, " "), ep.Port, n, c.tcx)
			}
		}
		ping(t, e.state, "hook", "a", "10.0.0.2")
		mustTrellis(t, e.state, "down", "hook")
	}
	e.assertClean()
}
