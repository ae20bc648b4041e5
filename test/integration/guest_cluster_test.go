//go:build integration

package integration

// The cluster on machines that are real kernels: three QEMU guests of Debian 12's kernel (6.1),
// each running `trellis agent --placer`, their network cards on taps of a bridge (the underlay
// switch, 198.18.0.0/24) in a namespace of the test's own on the host, where the etcd member
// runs too. A chain spread over the three is placed, converges, and pings across two EGRE
// tunnels between the guests' kernels (their GRE frames are seen on the taps); then the QEMU of
// the guest holding c is killed (a machine lost with its kernel), c is placed again on another
// guest and reachable again, and the time that took is logged. It runs in CI (about 70 s);
// docs/guest-kernel.md says how long each step takes.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/trellisnet/trellis/test/guestvm"
)

// guestClusterEnv, set to a kernel (6.1, or a release), runs TestGuestCluster in guests of it
// instead of 6.1, and fails it if a piece is missing (scripts/test.sh --kernel 6.1 --cluster).
const guestClusterEnv = "TRELLIS_GUEST_CLUSTER"

// guestMachines is how many guests the cluster has.
const guestMachines = 3

// guestMachine is one guest of the cluster: its QEMU runs until cancel.
type guestMachine struct {
	name   string
	cancel context.CancelFunc
	log    *lockedBuffer // its console: kernel messages and the agent's log
	done   chan struct{} // closed when QEMU has ended, err set
	err    error         // guestvm.Run's
}

// ended fails the test if a guest's QEMU has ended (it should run until the test kills it).
func ended(t *testing.T, guests []*guestMachine) {
	t.Helper()
	for _, g := range guests[1:] {
		select {
		case <-g.done:
			t.Fatalf("guest %s ended: %v\n%s", g.name, g.err, g.log)
		default:
		}
	}
}

func TestGuestCluster(t *testing.T) {
	if os.Getenv("TRELLIS_IN_GUEST") != "" {
		testkit.Skip(t, "already in a guest: TestGuestCluster starts the guests, from the host")
	}
	release, asked := os.Getenv(guestClusterEnv), true
	if release == "" {
		release, asked = "6.1", false
	}
	testkit.RequireTool(t, "ip", "scripts/setup.sh installs iproute2")
	whole := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	k := guestKernel(ctx, t, release, asked)
	dir := t.TempDir()
	initBin := filepath.Join(dir, "guestrun")
	guestBuild(ctx, t, map[string][]string{"guestrun": {"build", "-o", initBin, "./test/guestvm/guestrun"}})

	before := snapshot(t)
	ns := "tgc" + nonce() + "-ul"
	mustHostRun(t, "ip", "netns", "add", ns)
	t.Cleanup(func() {
		if out, err := hostRun("ip", "netns", "del", ns); err != nil {
			t.Errorf("cleanup: ip netns del %s: %v\n%s", ns, err, out)
		}
		assertClean(t, before)
	})
	in := func(argv ...string) { mustHostRun(t, append([]string{"ip", "-n", ns}, argv...)...) }
	in("link", "set", "lo", "up")
	in("link", "add", "ul", "type", "bridge")
	in("addr", "add", etcdAddr+"/24", "dev", "ul")
	in("link", "set", "ul", "up")
	for i := 1; i <= guestMachines; i++ {
		tap := fmt.Sprintf("tap%d", i)
		in("tuntap", "add", "dev", tap, "mode", "tap")
		in("link", "set", tap, "master", "ul", "up")
	}
	c := etcdtest.StartWith(t, 1, etcdtest.Options{Host: etcdAddr, Netns: ns})
	k8 := &clusterOf{etcd: c, s: cluster.New(c.Client()), agents: make([]*agentProc, guestMachines+1)}

	guests := make([]*guestMachine, guestMachines+1)
	var wg sync.WaitGroup
	t.Cleanup(func() { // every QEMU ends before the namespace goes
		for _, g := range guests[1:] {
			if g != nil {
				g.cancel()
			}
		}
		wg.Wait()
	})
	booted := time.Now()
	for i := 1; i <= guestMachines; i++ {
		g := startGuestMachine(t, ctx, &wg, k, initBin, ns, c, i)
		guests[i] = g
		k8.agents[i] = &agentProc{log: g.log}
	}
	waitFor(t, 8*time.Minute, "three guests booted and their agents registered", func() (bool, string) {
		ended(t, guests)
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		ms, _, err := k8.s.Machines(ctx)
		return err == nil && len(ms) == guestMachines, fmt.Sprint(ms, err, "\n", k8.logs())
	})
	t.Logf("three guests of Linux %s booted and registered in etcd: %v", k.Release, time.Since(booted).Round(time.Second))

	ctxFile := writeTopo(t, fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\ntenant: t1\n",
		strings.Join(c.Endpoints, ", "), c.Root.CA, c.Root.Cert, c.Root.Key))
	state := t.TempDir()
	cli := func(t *testing.T, args ...string) (string, error) { // trellis --cluster on the host, in the underlay's namespace
		t.Helper()
		argv := append([]string{"ip", "netns", "exec", ns, trellisBin, "--state-dir", state, "--cluster", ctxFile}, args...)
		return hostRun(argv...)
	}
	ping := func(t *testing.T) error {
		t.Helper()
		_, err := cli(t, "exec", "chain", "a", "--", "ping", "-c", "1", "-W", "2", "10.0.2.2")
		return err
	}
	up := time.Now()
	if out, err := cli(t, "up", writeTopo(t, fmt.Sprintf(clusterChainTopo, "")), "--wait", "10m"); err != nil {
		t.Fatalf("up --cluster: %v\n%s\n%s", err, out, k8.logs())
	}
	p := k8.converged(t, "chain", k8.generation(t, "chain"))
	t.Logf("up --cluster, converged on the guests: %v; placement %v (load average %s)", time.Since(up).Round(time.Second), p.Nodes, loadAverage())
	if len(p.Machines) != guestMachines {
		t.Fatalf("chain placed on %v, want the three guests", p.Nodes)
	}
	// b's guest is where both tunnels end: its tap carries a->b and b->c.
	capture := (&machines{t: t, ul: ns}).captureGRE(t, 0, fmt.Sprintf("tap%d", where(p, "b")))
	first := time.Now()
	for ping(t) != nil {
		if time.Since(first) > 2*time.Minute {
			frames := capture.stop(t)
			inspect, _ := cli(t, "inspect", "chain")
			t.Fatalf("a does not reach c across the guests within 2 minutes; %d GRE frames on b's tap %v\n%s\n%s", len(frames), grePairs(frames), inspect, k8.logs())
		}
		time.Sleep(time.Second)
	}
	checkGuestEGRE(t, capture.stop(t), p)
	t.Logf("a reached c across the guests after %v", time.Since(first).Round(time.Millisecond))

	lost := where(p, "c")
	lostAt := time.Now()
	guests[lost].cancel() // SIGKILL to its QEMU: the machine and its kernel are gone
	<-guests[lost].done
	var q *cluster.Placement
	waitFor(t, 3*time.Minute, "c placed on another guest", func() (bool, string) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		q, err = k8.s.Placement(ctx, "t1", "chain")
		return err == nil && q.Refused == "" && where(q, "c") != 0 && where(q, "c") != lost, fmt.Sprintf("%+v %v", q, err)
	})
	placed := time.Since(lostAt)
	waitFor(t, 5*time.Minute, "a reaches c again", func() (bool, string) {
		err := ping(t)
		return err == nil, fmt.Sprint(err, "\n", k8.logs())
	})
	t.Logf("guest m%d's QEMU killed: c placed again on %s after %v, a reached it again after %v (lease 5s; load average %s)",
		lost, q.Nodes["c"], placed.Round(time.Millisecond), time.Since(lostAt).Round(time.Millisecond), loadAverage())

	if out, err := cli(t, "down", "chain"); err != nil || out != "network chain is down\n" {
		t.Errorf("down --cluster: %v, said %q", err, out)
	}
	t.Logf("the whole run, building the guest's init and booting included: %v (load average %s)", time.Since(whole).Round(time.Second), loadAverage())
}

// loadAverage is the host's load average over 1, 5 and 15 minutes, logged with every figure:
// the guests' CPUs are host threads, and eight engineers share two cores.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// startGuestMachine boots guest i (machine mI, 198.18.0.I on tap I of the bridge in namespace
// ns) running `trellis agent --placer` with a certificate of its own, as trellis machine add
// issues it.
func startGuestMachine(t *testing.T, ctx context.Context, wg *sync.WaitGroup, k guestvm.Kernel, initBin, ns string, c *etcdtest.Cluster, i int) *guestMachine {
	t.Helper()
	name, addr := fmt.Sprintf("m%d", i), fmt.Sprintf("198.18.0.%d", i) // m1..: where() reads the placement's names
	f := certAs(t, c.CA, c.Root.CA, cluster.AgentUser(name), pki.Client|pki.Server, []string{addr})
	ctx, cancel := context.WithCancel(ctx)
	g := &guestMachine{name: name, cancel: cancel, log: &lockedBuffer{}, done: make(chan struct{})}
	cfg := guestvm.Config{
		Kernel: k, Init: initBin, Memory: "1G", CPUs: 1, Timeout: 20 * time.Minute, Console: g.log,
		Hostname: name, Netns: ns,
		NIC: &guestvm.NIC{Tap: fmt.Sprintf("tap%d", i), MAC: fmt.Sprintf("52:54:00:12:00:%02x", i), Address: addr + "/24"},
		Argv: []string{trellisBin, "agent", "--placer", "--etcd", strings.Join(c.Endpoints, ","), "--machine", name,
			"--address", addr, "--lease", "5s", "--cacert", f.CA, "--cert", f.Cert, "--key", f.Key},
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, g.err = guestvm.Run(ctx, cfg)
		close(g.done)
	}()
	return g
}

// checkGuestEGRE checks that the capture on b's tap saw EGRE frames from a's guest to b's and
// from b's to c's: the tunnels are the guests' kernels' own.
func checkGuestEGRE(t *testing.T, frames []capturedFrame, p *cluster.Placement) {
	t.Helper()
	pairs := grePairs(frames)
	a, b, c := p.Machines[p.Nodes["a"]].Address, p.Machines[p.Nodes["b"]].Address, p.Machines[p.Nodes["c"]].Address
	for _, want := range []string{fmt.Sprintf("%v>%v", a, b), fmt.Sprintf("%v>%v", b, c)} {
		if !pairs[want] {
			t.Errorf("no EGRE frame %s on b's tap (seen: %v)", want, pairs)
		}
	}
}

// grePairs are the source>destination underlay addresses of the EGRE frames captured.
func grePairs(frames []capturedFrame) map[string]bool {
	pairs := map[string]bool{}
	for _, f := range frames {
		if e, err := decodeEGRE(f.data); err == nil && e.proto == 47 {
			pairs[e.src.String()+">"+e.dst.String()] = true
		}
	}
	return pairs
}
