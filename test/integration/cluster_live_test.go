//go:build integration

package integration

// What a tenant sets live in a cluster stays set (docs/cluster.md, "exec and link"): a link
// taken down through the agents stays down on both ends when one agent is killed with -9 and
// started again, until `link up` or the network's next generation, which applies the file's
// state; and what a node made itself (an address added inside it) survives the agents' link
// changes, a new generation's rate change and an agent's restart. The same holds when the
// generation is placed anew (a tunnel key changed, as the placer may write it again). Two
// simulated machines, a 1-member etcd in the underlay namespace, an agent (and placer) on each
// serving exec and link.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

const clusterLiveTopo = `name: lab
nodes:
  a: {host: m1, addresses: {eth1: [10.0.1.1/24]}}
  b: {host: m2, addresses: {eth1: [10.0.1.2/24]}}
%slinks:
  - name: ab
    endpoints: [a:eth1, b:eth1]
%s`

func TestClusterLiveState(t *testing.T) {
	k := newCluster(t, 2, 1, "lab")
	m, c := k.m, k.etcd
	local := agent.LocalName("t1", "lab")
	certs := make([]pki.Files, 3)
	for i := 1; i <= 2; i++ { // as `trellis machine add` issues them: a server for the machine's address too
		certs[i] = certAs(t, c.CA, c.Root.CA, cluster.AgentUser(m.name(i)), pki.Client|pki.Server, []string{m.addr(i)})
		k.agents[i] = endpointAgent(t, m, c, i, certs[i])
	}
	waitFor(t, 15*time.Second, "two machines registered", func() (bool, string) { // before a file pins nodes to them
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ms, _, err := k.s.Machines(ctx)
		return err == nil && len(ms) == 2, fmt.Sprint(ms, err, "\n", k.logs())
	})
	ctxFile := writeTopo(t, fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\ntenant: t1\n",
		strings.Join(c.Endpoints, ", "), c.Root.CA, c.Root.Cert, c.Root.Key))
	cli := func(t *testing.T, args ...string) string { // trellis --cluster on machine m1
		t.Helper()
		return m.trellis(t, 1, append([]string{"--cluster", ctxFile}, args...)...)
	}
	topo := writeTopo(t, fmt.Sprintf(clusterLiveTopo, "", ""))
	cli(t, "up", topo)
	k.converged(t, "lab", k.generation(t, "lab"))
	m.ping(t, 1, local, "a", "10.0.1.2")

	// What the node makes itself: an address trellis did not place.
	cli(t, "exec", "lab", "b", "--", "ip", "addr", "add", "10.7.0.2/24", "dev", "eth1")
	nodeAddr := func(t *testing.T, after string) {
		t.Helper()
		if out := m.mustExec(t, 2, local, "b", "ip", "-o", "addr", "show", "dev", "eth1"); !strings.Contains(out, "10.7.0.2/24") {
			t.Errorf("after %s, b's eth1 lost the address its own software added (10.7.0.2/24):\n%s", after, out)
		}
	}
	// ends says the state of link ab's endpoint on each machine, as the kernel has it.
	ends := func(t *testing.T) string {
		t.Helper()
		var s []string
		for i := 1; i <= 2; i++ {
			for _, e := range m.inspect(t, i, local).link(t, "ab").Endpoints {
				s = append(s, fmt.Sprintf("m%d %s:%s %s", i, e.Node, e.Interface, e.State))
			}
		}
		return strings.Join(s, ", ")
	}
	const allDown, allUp = "m1 a:eth1 down, m2 b:eth1 down", "m1 a:eth1 up, m2 b:eth1 up"
	pingFails := func(t *testing.T, when string) {
		t.Helper()
		if err := m.tryPing(1, local, "a", "10.0.1.2", "-c", "1", "-W", "1"); err == nil {
			t.Errorf("%s: a reaches b although link ab is down", when)
		}
	}
	pingWorks := func(t *testing.T, when string) {
		t.Helper()
		waitFor(t, 10*time.Second, when+": a reaches b", func() (bool, string) {
			err := m.tryPing(1, local, "a", "10.0.1.2", "-c", "1", "-W", "1")
			return err == nil, fmt.Sprint(err)
		})
	}

	if out := cli(t, "link", "lab", "ab", "down"); out != "link ab of network lab is down on m1, m2\n" {
		t.Errorf("link lab ab down said %q", out)
	}
	if got := ends(t); got != allDown {
		t.Fatalf("after link down through the cluster: %s, want %s", got, allDown)
	}
	pingFails(t, "link down")
	nodeAddr(t, "link down")

	outer := t // the agent started again must outlive the subtest
	restartM2 := func(t *testing.T) {
		t.Helper()
		k.agents[2].kill()
		restarted := time.Now()
		k.agents[2] = endpointAgent(outer, m, c, 2, certs[2])
		// The agent started again has applied the generation once it reported it anew.
		waitFor(t, 30*time.Second, "m2 reporting lab again after its agent's restart", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			sts, err := k.s.Statuses(ctx, "t1", "lab")
			for _, st := range sts {
				if st.Machine == "m2" && st.State == cluster.Converged && st.Time.After(restarted) {
					return true, ""
				}
			}
			return false, fmt.Sprint(sts, err, "\n", k.logs())
		})
	}
	t.Run("kill -9 an agent and start it again", func(t *testing.T) {
		restartM2(t)
		if got := ends(t); got != allDown {
			t.Errorf("after m2's agent was killed and started again: %s, want %s (the link as the tenant set it)\n%s", got, allDown, k.logs())
		}
		pingFails(t, "agent restarted")
		nodeAddr(t, "the agent's restart")
	})

	t.Run("the same generation placed anew", func(t *testing.T) {
		// As when the placer writes a placement again for the same generation (a machine lost,
		// an agent's new address): here link ab's tunnel gets another key, which both machines
		// apply; the link stays as the tenant set it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p, err := k.s.Placement(ctx, "t1", "lab")
		if err != nil {
			t.Fatal(err)
		}
		changed := func() [3]int {
			return [3]int{0, strings.Count(k.agents[1].log.String(), "network changed"), strings.Count(k.agents[2].log.String(), "network changed")}
		}
		before := changed()
		q := *p
		q.Keys = map[string]uint32{"ab": p.Keys["ab"] ^ 0x5a5a5a}
		if _, err := k.s.PutPlacement(ctx, &q, p.Revision); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "both machines applying the new tunnel key", func() (bool, string) {
			now := changed()
			return now[1] > before[1] && now[2] > before[2], k.logs()
		})
		if got := ends(t); got != allDown {
			t.Errorf("after the generation was placed anew: %s, want %s (the link as the tenant set it)\n%s", got, allDown, k.logs())
		}
		pingFails(t, "placed anew")
	})

	t.Run("link up", func(t *testing.T) {
		cli(t, "link", "lab", "ab", "up")
		if got := ends(t); got != allUp {
			t.Errorf("after link up: %s, want %s", got, allUp)
		}
		pingWorks(t, "link up")
		nodeAddr(t, "link up")
	})

	t.Run("a new generation applies the file's state", func(t *testing.T) {
		cli(t, "link", "lab", "ab", "down")
		rewriteTopo(t, topo, fmt.Sprintf(clusterLiveTopo, "", "    rate: 50mbit\n"))
		cli(t, "up", topo)
		k.converged(t, "lab", k.generation(t, "lab"))
		if got := ends(t); got != allUp {
			t.Errorf("after up of a new generation (a rate change): %s, want the file's: %s", got, allUp)
		}
		for i := 1; i <= 2; i++ {
			if got := m.inspect(t, i, local).link(t, "ab").Rate; got != "50mbit" {
				t.Errorf("m%d: link ab's rate %q, want 50mbit", i, got)
			}
		}
		pingWorks(t, "new generation")
		nodeAddr(t, "a rate change by a new generation")
	})

	t.Run("a generation that changes nothing on a machine", func(t *testing.T) {
		// Node c on m1 alone: m2's part is as it was, and its record must still say it holds
		// the new generation, or its agent's next restart would take the link back to the file.
		rewriteTopo(t, topo, fmt.Sprintf(clusterLiveTopo, "  c: {host: m1}\n", "    rate: 50mbit\n"))
		cli(t, "up", topo)
		k.converged(t, "lab", k.generation(t, "lab"))
		cli(t, "link", "lab", "ab", "down")
		restartM2(t)
		if got := ends(t); got != allDown {
			t.Errorf("after a generation that left m2 alone, link down and m2's agent restarted: %s, want %s\n%s", got, allDown, k.logs())
		}
		pingFails(t, "agent restarted after a generation that left its machine alone")
	})

	cli(t, "down", "lab")
}
