//go:build integration

package integration

// A cluster of three simulated machines (network namespaces, as scripts/sim-machines.sh makes
// them), each running its own `trellis agent --placer`, and a 3-member etcd in the underlay
// namespace, driven by the CLI with --cluster: a network is placed over the machines and
// converges, traffic crosses two tunnels; ls, inspect and diff show it; an agent killed with -9
// leaves forwarding alone and, started again, restarts nothing; a network that does not fit is
// refused and nothing is created; a machine that is lost has its node placed again on the
// others, and traffic flows again; down takes it off every machine.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
	"github.com/trellisnet/trellis/internal/plan"
)

// etcdAddr is the underlay address of the etcd members, on the underlay's bridge.
const etcdAddr = "198.18.0.254"

const clusterChainTopo = `name: chain
nodes:
  a:
    addresses:
      eth1: [10.0.1.1/24]
    exec: ["ip route add 10.0.2.0/24 via 10.0.1.2"]
  b:
    addresses:
      eth1: [10.0.1.2/24]
      eth2: [10.0.2.1/24]
  c:
    addresses:
      eth1: [10.0.2.2/24]
    exec: ["ip route add 10.0.1.0/24 via 10.0.2.1"]
links:
  - name: ab
    endpoints: [a:eth1, b:eth1]
%s  - name: bc
    endpoints: [b:eth2, c:eth1]
`

// machineAgent starts `trellis agent --placer` on simulated machine i with etcd's root
// certificate.
func machineAgent(t *testing.T, m *machines, c *etcdtest.Cluster, i int) *agentProc {
	t.Helper()
	return endpointAgent(t, m, c, i, c.Root)
}

// endpointAgent starts `trellis agent --placer` on simulated machine i with certificate f,
// serving exec and link on the machine's underlay address (the default --listen, :7445).
func endpointAgent(t *testing.T, m *machines, c *etcdtest.Cluster, i int, f pki.Files) *agentProc {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", m.ns(i), trellisBin, "--state-dir", m.state(i), "agent", "--placer",
		"--etcd", strings.Join(c.Endpoints, ","), "--machine", m.name(i), "--lease", "3s",
		"--cacert", f.CA, "--cert", f.Cert, "--key", f.Key)
	a := &agentProc{cmd: cmd, log: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = a.log, a.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { a.kill() })
	return a
}

// newCluster makes n simulated machines and an etcd of members members on the underlay's
// bridge, for a test's network of the tenant t1 (registered for the clean-up check); the test
// starts the agents (k.agents[1..n]).
func newCluster(t *testing.T, n, members int, network string) *clusterOf {
	t.Helper()
	m := machinesUp(t, n)
	mustHostRun(t, "ip", "-n", m.ul, "addr", "add", etcdAddr+"/24", "dev", "ul")
	c := etcdtest.StartWith(t, members, etcdtest.Options{Host: etcdAddr, Netns: m.ul})
	registerNetwork(agent.LocalName("t1", network))
	return &clusterOf{m: m, etcd: c, s: cluster.New(c.Client()), agents: make([]*agentProc, n+1)}
}

// clusterOf is a test's cluster: its machines, etcd, store and agents (index 1..n).
type clusterOf struct {
	m      *machines
	etcd   *etcdtest.Cluster
	s      *cluster.Store
	agents []*agentProc
}

func (k *clusterOf) logs() string {
	var b strings.Builder
	for i := 1; i < len(k.agents); i++ {
		fmt.Fprintf(&b, "--- agent m%d:\n%s", i, k.agents[i].log)
	}
	return b.String()
}

// converged waits until every machine of the network's placement reports generation gen
// converged with as many nodes as the placement gives it, and returns the placement.
func (k *clusterOf) converged(t *testing.T, name string, gen int64) *cluster.Placement {
	t.Helper()
	var p *cluster.Placement
	waitFor(t, 60*time.Second, fmt.Sprintf("t1/%s converged on its machines", name), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		if p, err = k.s.Placement(ctx, "t1", name); err != nil || p.Generation != gen {
			return false, fmt.Sprintf("placement %+v (%v)\n%s", p, err, k.logs())
		}
		if p.Refused != "" {
			t.Fatalf("t1/%s refused: %s", name, p.Refused)
		}
		want := map[string]int{}
		for _, m := range p.Nodes {
			want[m]++
		}
		sts, err := k.s.Statuses(ctx, "t1", name)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]int{}
		for _, st := range sts {
			if st.State == cluster.Failed {
				t.Fatalf("t1/%s failed on %s: %s\n%s", name, st.Machine, st.Error, k.logs())
			}
			if st.Generation == gen && st.State == cluster.Converged && want[st.Machine] > 0 {
				got[st.Machine] = st.Nodes
			}
		}
		return maps.Equal(got, want), fmt.Sprintf("nodes converged per machine %v, placed %v\n%s", got, want, k.logs())
	})
	return p
}

// where is the index of the machine placement p puts node on; 0 if it puts it nowhere.
func where(p *cluster.Placement, node string) int {
	var i int
	fmt.Sscanf(p.Nodes[node], "m%d", &i)
	return i
}

func TestClusterThreeMachines(t *testing.T) {
	k := newCluster(t, 3, 3, "chain")
	m, c := k.m, k.etcd
	local := agent.LocalName("t1", "chain")
	for i := 1; i <= 3; i++ {
		k.agents[i] = machineAgent(t, m, c, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitFor(t, 15*time.Second, "three machines registered", func() (bool, string) {
		ms, _, err := k.s.Machines(ctx)
		return err == nil && len(ms) == 3, fmt.Sprint(ms, err, "\n", k.logs())
	})

	ctxFile := writeTopo(t, fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\ntenant: t1\n",
		strings.Join(c.Endpoints, ", "), c.Root.CA, c.Root.Cert, c.Root.Key))
	cli := func(t *testing.T, args ...string) string { // trellis --cluster on machine m1
		t.Helper()
		return m.trellis(t, 1, append([]string{"--cluster", ctxFile}, args...)...)
	}
	topo := writeTopo(t, fmt.Sprintf(clusterChainTopo, ""))
	start := time.Now()
	out := cli(t, "up", topo)
	took := time.Since(start)
	if !strings.Contains(out, "network chain is up on 3 machines: m1 (1 node), m2 (1 node), m3 (1 node)") {
		t.Errorf("up --cluster said %q", out)
	}
	gen := k.generation(t, "chain")
	p := k.converged(t, "chain", gen)
	t.Logf("trellis up --cluster to every agent converged: %v; placement %v", took.Round(time.Millisecond), p.Nodes)
	if out := cli(t, "ls"); !regexp.MustCompile(`(?m)^chain\s+up\s+` + fmt.Sprint(gen) + `\s+m1 \(1 node\), m2 \(1 node\), m3 \(1 node\)\s+(-|\d+ pkts, \d+ KiB)\s+` + regexp.QuoteMeta(topo) + `$`).MatchString(out) {
		t.Errorf("ls --cluster:\n%s", out)
	}
	var info struct {
		Status string            `json:"status"`
		Nodes  map[string]string `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(cli(t, "inspect", "chain", "--json")), &info); err != nil || info.Status != "up" || !maps.Equal(info.Nodes, p.Nodes) {
		t.Errorf("inspect --cluster --json: %+v (%v), want up and the placement %v", info, err, p.Nodes)
	}
	if len(p.Machines) != 3 {
		t.Fatalf("chain placed on %v, want the three machines", p.Nodes)
	}
	m.ping(t, where(p, "a"), local, "a", "10.0.2.2")
	pids := map[int]map[string]int{}
	for i := 1; i <= 3; i++ {
		pids[i] = m.inspect(t, i, local).pids()
	}

	outer := t // the agent started again must outlive the subtest
	t.Run("kill -9 an agent", func(t *testing.T) {
		mid := where(p, "b")
		k.agents[mid].kill()
		m.ping(t, where(p, "a"), local, "a", "10.0.2.2")
		k.agents[mid] = machineAgent(outer, m, c, mid)
		rewriteTopo(t, topo, fmt.Sprintf(clusterChainTopo, "    rate: 50mbit\n"))
		if out := cli(t, "diff", topo); out != "~ link ab: rate none -> 50mbit\n" {
			t.Errorf("diff --cluster said %q", out)
		}
		if out := cli(t, "up", topo); !strings.Contains(out, "network chain changed") || !strings.Contains(out, "~ link ab: rate none -> 50mbit") {
			t.Errorf("up --cluster of a rate change said %q", out)
		}
		gen = k.generation(t, "chain")
		k.converged(t, "chain", gen)
		for i := 1; i <= 3; i++ {
			if got := m.inspect(t, i, local).pids(); !maps.Equal(got, pids[i]) {
				t.Errorf("m%d: node pids %v after the agent's restart and a rate change, want %v (nothing restarted)", i, got, pids[i])
			}
		}
		m.ping(t, where(p, "a"), local, "a", "10.0.2.2")
	})

	t.Run("etcd faults", func(t *testing.T) {
		// One member killed: nothing is noticed, a change goes through.
		c.Kill(0)
		rewriteTopo(t, topo, fmt.Sprintf(clusterChainTopo, "    rate: 40mbit\n"))
		start := time.Now()
		cli(t, "up", topo)
		t.Logf("up --cluster with one etcd member killed: %v", time.Since(start).Round(time.Millisecond))
		// Quorum lost: forwarding goes on, a change is refused with a clear error, in time.
		c.Kill(1)
		m.ping(t, where(p, "a"), local, "a", "10.0.2.2")
		rewriteTopo(t, topo, fmt.Sprintf(clusterChainTopo, "    rate: 30mbit\n"))
		start = time.Now()
		_, errOut, err := m.run(1, "--cluster", ctxFile, "up", topo)
		if took := time.Since(start); err == nil || !strings.Contains(errOut, "etcd unreachable") || took > 8*time.Second {
			t.Errorf("up --cluster without a quorum: %v after %v\n%s", err, took, errOut)
		}
		m.ping(t, where(p, "a"), local, "a", "10.0.2.2")
		c.Restart(0)
		c.Restart(1)
		if err := c.WaitHealthy(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		cli(t, "up", topo)
		gen = k.generation(t, "chain")
		k.converged(t, "chain", gen)
		t.Logf("after the quorum came back, up --cluster converged in %v", time.Since(start).Round(time.Millisecond))
		if got := m.inspect(t, where(p, "a"), local).link(t, "ab").Rate; got != "30mbit" {
			t.Errorf("link ab's rate is %q, want 30mbit", got)
		}
	})

	t.Run("refused", func(t *testing.T) {
		big := writeTopo(t, "name: big\nnodes:\n  a: {memory: 100000G}\n")
		_, errOut, err := m.run(1, "--cluster", ctxFile, "up", big)
		if err == nil || !strings.Contains(errOut, "network big does not fit") || !strings.Contains(errOut, "memory") || !strings.Contains(errOut, "nothing was created") {
			t.Errorf("up --cluster of a network too big: %v\n%s", err, errOut)
		}
		if out := cli(t, "ls"); strings.Contains(out, "big") {
			t.Errorf("ls --cluster after the refusal:\n%s", out)
		}
	})

	t.Run("tunnel keys of colliding names", func(t *testing.T) {
		// Two networks whose links derive one VXLAN id both run: the placer gives each link a
		// key of its own. Keys derive from each network's random secret, so names alone no
		// longer collide on purpose, but keys still meet by chance (24 bits); the test makes
		// it happen by giving both placements one secret under which the names collide, while
		// each network is on one machine, then spreads them. Before, the second network's
		// VXLAN device was refused on both machines (the id "is already used on this machine").
		secret := []byte("trellis-it-keys!")
		first, second := collidingVXLAN(t, "t1", secret)
		topoOf := func(name, yHost string) string {
			return fmt.Sprintf("name: %s\ntunnel: vxlan\nnodes:\n  x: {host: m1, addresses: {eth1: [10.9.0.1/24]}}\n"+
				"  y: {host: %s, addresses: {eth1: [10.9.0.2/24]}}\nlinks:\n  - {name: l, endpoints: [x:eth1, y:eth1]}\n", name, yHost)
		}
		keys := map[string]uint32{}
		for _, name := range []string{first, second} {
			registerNetwork(agent.LocalName("t1", name))
			topo := writeTopo(t, topoOf(name, "m1"))
			cli(t, "up", topo)
			defer cli(t, "down", name)
			k.withSecret(t, name, k.converged(t, name, k.generation(t, name)), secret)
			rewriteTopo(t, topo, topoOf(name, "m2"))
			if _, errOut, err := m.run(1, "--cluster", ctxFile, "up", topo); err != nil {
				t.Fatalf("up --cluster of %s, whose link derives the VXLAN id of %s's: %v\n%s", name, first, err, errOut)
			}
			keys[name] = k.converged(t, name, k.generation(t, name)).Keys["l"]
		}
		if derived := plan.TunnelKey(secret, agent.LocalName("t1", first), "l"); keys[first] != derived || keys[second]&0xffffff == derived&0xffffff {
			t.Errorf("keys %#x and %#x; want the first %#x, derived from the secret, and the second of another VXLAN id", keys[first], keys[second], derived)
		}
		for _, name := range []string{first, second} {
			if err := m.tryPing(1, agent.LocalName("t1", name), "x", "10.9.0.2", "-c", "1", "-W", "2"); err != nil {
				t.Errorf("%s: x does not reach y across the machines: %v", name, err)
			}
		}
	})

	t.Run("machine lost", func(t *testing.T) {
		lost := where(p, "c")
		start := time.Now()
		k.agents[lost].kill()
		mustHostRun(t, "ip", "-n", m.ul, "link", "set", m.name(lost), "down") // its cable pulled
		var q *cluster.Placement
		waitFor(t, 30*time.Second, "c placed on another machine", func() (bool, string) {
			var err error
			q, err = k.s.Placement(ctx, "t1", "chain")
			return err == nil && q.Refused == "" && where(q, "c") != 0 && where(q, "c") != lost, fmt.Sprintf("%+v %v\n%s", q, err, k.logs())
		})
		placed := time.Since(start)
		took := waitFor(t, 30*time.Second, "a reaches c again", func() (bool, string) {
			err := m.tryPing(where(q, "a"), local, "a", "10.0.2.2", "-c", "1", "-W", "1")
			return err == nil, fmt.Sprint(err, "\n", k.logs())
		})
		t.Logf("machine %s lost: c placed again on %s after %v, traffic again after %v (lease 3s)",
			m.name(lost), q.Nodes["c"], placed.Round(time.Millisecond), (placed + took).Round(time.Millisecond))
		mustHostRun(t, "ip", "-n", m.ul, "link", "set", m.name(lost), "up")
	})

	t.Run("down", func(t *testing.T) {
		if out := cli(t, "down", "chain"); out != "network chain is down\n" {
			t.Errorf("down --cluster said %q", out)
		}
		for i := 1; i <= 3; i++ {
			if i != where(p, "c") && len(m.inspectList(t, i)) != 0 {
				t.Errorf("m%d still holds networks after down --cluster: %v", i, m.inspectList(t, i))
			}
		}
	})
}

// generation returns the network's generation in the cluster.
func (k *clusterOf) generation(t *testing.T, name string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := k.s.Network(ctx, "t1", name)
	if err != nil {
		t.Fatal(err)
	}
	return n.Revision
}

// inspectList lists the networks in machine i's state directory (trellis ls there).
func (m *machines) inspectList(t *testing.T, i int) []string {
	t.Helper()
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(m.trellis(t, i, "ls")), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// pids returns the init pid of each node inspect shows.
func (n *mhInfo) pids() map[string]int {
	out := map[string]int{}
	for _, nd := range n.Nodes {
		out[nd.Name] = nd.PID
	}
	return out
}

// collidingVXLAN finds two network names of tenant whose link "l" derives, under secret, one
// VXLAN id on the machines (plan.TunnelKey of TENANT.NETWORK; 24 bits: a few thousand names on
// average).
func collidingVXLAN(t *testing.T, tenant string, secret []byte) (string, string) {
	t.Helper()
	seen := map[uint32]string{}
	for i := 0; i < 1<<22; i++ {
		name := fmt.Sprintf("vx%d", i)
		vni := plan.TunnelKey(secret, agent.LocalName(tenant, name), "l") & 0xffffff
		if other, ok := seen[vni]; ok {
			return other, name
		}
		seen[vni] = name
	}
	t.Fatal("no two names with one derived VXLAN id in 4 million")
	return "", ""
}

// withSecret writes placement p of t1's network name again with the tunnel secret secret (as
// the placer keeps it when it places the network again).
func (k *clusterOf) withSecret(t *testing.T, name string, p *cluster.Placement, secret []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.Secret = hex.EncodeToString(secret)
	if _, err := k.s.PutPlacement(ctx, p, p.Revision); err != nil {
		t.Fatalf("placement of %s with another secret: %v", name, err)
	}
}
