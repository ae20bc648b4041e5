//go:build integration

package integration

// Two `trellis up --cluster` of one network at once, as two people of one tenant would run them
// (files differing in one link's rate), against a 3-member etcd and an agent and placer on each
// of two simulated machines: every round ends within seconds with one up converged and the
// other refused as a conflict (nothing changed) or told, with exit status 3, that it was
// overtaken by the winner's generation (or, now and then, both converged one after the other).
// Then what up prints is checked to cover its whole run,
// and every cluster verb is tried while etcd has lost its quorum.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
)

const raceTopo = `name: two
nodes:
  a:
    addresses:
      eth1: [10.0.1.1/24]
  b:
    addresses:
      eth1: [10.0.1.2/24]
links:
  - name: ab
    endpoints: [a:eth1, b:eth1]
    rate: %dmbit
`

// cliRun is one trellis command's end: its output, exit status and wall time.
type cliRun struct {
	out, errOut string
	status      int
	took        time.Duration
}

func (r cliRun) String() string {
	return fmt.Sprintf("exit status %d after %v\nstdout: %s\nstderr: %s", r.status, r.took.Round(time.Millisecond), r.out, r.errOut)
}

// runningCLI is a trellis command started on a machine.
type runningCLI struct {
	cmd    *exec.Cmd
	o, e   bytes.Buffer
	start  time.Time
	cancel context.CancelFunc
}

// startFor starts trellis on machine i, to be killed after limit.
func (m *machines) startFor(t *testing.T, limit time.Duration, i int, args ...string) *runningCLI {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	r := &runningCLI{cmd: m.command(ctx, i, args...), cancel: cancel, start: time.Now()}
	r.cmd.Stdout, r.cmd.Stderr = &r.o, &r.e
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	return r
}

// wait waits for the command's end.
func (r *runningCLI) wait() cliRun {
	defer r.cancel()
	err := r.cmd.Wait()
	res := cliRun{out: r.o.String(), errOut: r.e.String(), took: time.Since(r.start)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.status = exit.ExitCode()
	case err != nil:
		res.status, res.errOut = -1, res.errOut+err.Error()
	}
	return res
}

// runFor runs trellis on machine i, killing it after limit.
func (m *machines) runFor(t *testing.T, limit time.Duration, i int, args ...string) cliRun {
	return m.startFor(t, limit, i, args...).wait()
}

// connecting tells whether process pid is trellis and has a TCP socket: it is connecting to etcd.
func connecting(pid int) bool {
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); filepath.Base(exe) != "trellis" {
		return false
	}
	tcp, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	inodes := map[string]bool{}
	for _, l := range strings.Split(string(tcp), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 9 {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); inodes[l] {
			return true
		}
	}
	return false
}

// roundLimit is how long one round of two ups at once may take, both ends included.
const roundLimit = 8 * time.Second

func TestClusterConcurrentUps(t *testing.T) {
	k := newCluster(t, 2, 3, "two")
	m, c := k.m, k.etcd
	for i := 1; i <= 2; i++ {
		k.agents[i] = machineAgent(t, m, c, i)
	}
	waitFor(t, 15*time.Second, "two machines registered", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ms, _, err := k.s.Machines(ctx)
		return err == nil && len(ms) == 2, fmt.Sprint(ms, err, "\n", k.logs())
	})
	ctxFile := writeTopo(t, fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\ntenant: t1\n",
		strings.Join(c.Endpoints, ", "), c.Root.CA, c.Root.Cert, c.Root.Key))
	startUp := func(file string) *runningCLI {
		return m.startFor(t, 3*roundLimit, 1, "--cluster", ctxFile, "up", "--wait", "20s", file)
	}
	up := func(file string) cliRun { return startUp(file).wait() }
	first := up(writeTopo(t, fmt.Sprintf(raceTopo, 5)))
	if first.status != 0 {
		t.Fatalf("up --cluster: %v\n%s", first, k.logs())
	}
	t.Logf("first up: %s", first.out)

	t.Run("two ups at once", func(t *testing.T) { testConcurrentUps(t, k, up) })
	t.Run("printed time covers the wait", func(t *testing.T) { testUpTime(t, k, startUp) })
	t.Run("quorum lost", func(t *testing.T) { testQuorumLost(t, k, ctxFile, up) })
}

// testConcurrentUps runs 20 rounds of two ups of network two at once, each with a rate of its
// own. Even rounds start both together (they mostly read the same generation: one conflicts);
// odd rounds start the second 40 ms later (it mostly reads the first's generation and
// overtakes it).
func testConcurrentUps(t *testing.T, k *clusterOf, up func(string) cliRun) {
	counts := map[string]int{}
	var longest time.Duration
	for r := range 20 {
		rates := [2]int{10 + 2*r, 11 + 2*r}
		files := [2]string{writeTopo(t, fmt.Sprintf(raceTopo, rates[0])), writeTopo(t, fmt.Sprintf(raceTopo, rates[1]))}
		var runs [2]cliRun
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i == 1 && r%2 == 1 {
					time.Sleep(40 * time.Millisecond)
				}
				runs[i] = up(files[i])
			}()
		}
		wg.Wait()
		took := time.Since(start)
		longest = max(longest, took)
		what := fmt.Sprintf("round %d (rates %d and %d mbit, %v):\nfirst up: %v\nsecond up: %v", r, rates[0], rates[1], took.Round(time.Millisecond), runs[0], runs[1])
		if took > roundLimit {
			t.Fatalf("%s\nthe round took longer than %v\n%s", what, roundLimit, k.logs())
		}
		n, err := k.s.Network(context.Background(), "t1", "two")
		if err != nil {
			t.Fatal(err)
		}
		winner := -1
		for i := range 2 {
			if n.Source == fmt.Sprintf(raceTopo, rates[i]) {
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("%s\nthe network's file is neither of the two:\n%s", what, n.Source)
		}
		w, l := runs[winner], runs[1-winner]
		if w.status != 0 || !strings.Contains(w.out, "network two changed (committed in ") || !strings.Contains(w.out, fmt.Sprintf(" -> %dmbit\n", rates[winner])) {
			t.Fatalf("%s\nthe up whose file the cluster holds (generation %d) did not say it converged", what, n.Revision)
		}
		overtaken := fmt.Sprintf("trellis: overtaken: network two of tenant t1: generation %d was overtaken by generation %d (another up of the network) before it converged",
			generationOf(l.errOut), n.Revision)
		switch {
		case l.status == 1 && strings.Contains(l.errOut, "trellis: conflict: network two of tenant t1 was changed by someone else meanwhile"):
			counts["conflict"]++
		case l.status == cliExitOvertaken && strings.Contains(l.errOut, overtaken) && generationOf(l.errOut) < n.Revision:
			counts["overtaken"]++
		case l.status == 0 && strings.Contains(l.out, "network two changed"):
			// Both converged, one after the other: the second read the first's generation
			// after the first had converged on both machines.
			counts["one after the other"]++
		default:
			t.Fatalf("%s\nthe other up (not holding the cluster's file, generation %d) ended neither in a conflict nor overtaken (exit status %d)", what, n.Revision, cliExitOvertaken)
		}
		k.converged(t, "two", n.Revision)
		if got := k.m.inspect(t, 1, agent.LocalName("t1", "two")).link(t, "ab").Rate; got != fmt.Sprintf("%dmbit", rates[winner]) {
			t.Fatalf("%s\nlink ab's rate on m1 is %s, want the cluster's file's %dmbit", what, got, rates[winner])
		}
	}
	t.Logf("20 rounds of two ups at once: %v; longest round %v", counts, longest.Round(time.Millisecond))
	if counts["overtaken"] == 0 {
		t.Errorf("no round had an up overtaken (%v): the rounds did not test what they are for", counts)
	}
}

// cliExitOvertaken is up's exit status when it was overtaken (cli.ExitOvertaken).
const cliExitOvertaken = 3

var generationRE = regexp.MustCompile(`generation (\d+)`)

// generationOf is the first generation an error message names (0: none).
func generationOf(msg string) int64 {
	m := generationRE.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	g, _ := strconv.ParseInt(m[1], 10, 64)
	return g
}

// testUpTime checks that the times up prints are its whole run, counted from its start: with
// the agents (and so the placer) stopped from before up starts until 1.5 s after its commit is
// seen in etcd, the wait is counted; with etcd's members stopped from before up starts until
// 1 s after it opened its connection, the connecting is counted. The converged time is within
// the process's wall time.
func testUpTime(t *testing.T, k *clusterOf, startUp func(string) *runningCLI) {
	re := regexp.MustCompile(`\(committed in ([0-9.]+)s, converged in ([0-9.]+)s\)`)
	signal := func(pids []int, sig syscall.Signal) {
		for _, p := range pids {
			syscall.Kill(p, sig)
		}
	}
	agents := []int{k.agents[1].cmd.Process.Pid, k.agents[2].cmd.Process.Pid}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name  string
		rate  int
		pids  []int
		until func(r *runningCLI, before int64) (bool, string) // when to start counting the pause
		pause time.Duration
		check func(committed, converged float64) bool // what the pause makes up print
	}{
		{name: "agents stopped", rate: 7, pids: agents, pause: 1500 * time.Millisecond,
			until: func(r *runningCLI, before int64) (bool, string) {
				n, err := k.s.Network(ctx, "t1", "two")
				return err == nil && n.Revision != before, fmt.Sprint("the network not written: ", n, err)
			},
			check: func(committed, converged float64) bool { return converged-committed >= 1.49 }},
		{name: "etcd stopped", rate: 8, pids: k.etcd.PIDs(), pause: time.Second,
			until: func(r *runningCLI, before int64) (bool, string) {
				return connecting(r.cmd.Process.Pid), "up opened no connection"
			},
			check: func(committed, converged float64) bool { return committed >= 0.99 }},
	} {
		before, err := k.s.Network(ctx, "t1", "two")
		if err != nil {
			t.Fatal(err)
		}
		signal(tc.pids, syscall.SIGSTOP)
		r := startUp(writeTopo(t, fmt.Sprintf(raceTopo, tc.rate)))
		waitFor(t, 10*time.Second, tc.name+": up under way", func() (bool, string) { return tc.until(r, before.Revision) })
		time.Sleep(tc.pause)
		signal(tc.pids, syscall.SIGCONT)
		res := r.wait()
		mm := re.FindStringSubmatch(res.out)
		if res.status != 0 || mm == nil {
			t.Fatalf("%s: up: %v\n%s", tc.name, res, k.logs())
		}
		committed, _ := strconv.ParseFloat(mm[1], 64)
		converged, _ := strconv.ParseFloat(mm[2], 64)
		wall := res.took.Seconds()
		t.Logf("%s %v: up printed committed in %.2fs, converged in %.2fs; the process ran %.3fs", tc.name, tc.pause, committed, converged, wall)
		if !tc.check(committed, converged) || committed > converged || converged > wall+0.005 {
			t.Errorf("%s for %v: up printed committed in %.2fs, converged in %.2fs, and ran %.3fs", tc.name, tc.pause, committed, converged, wall)
		}
	}
}

// testQuorumLost tries every cluster verb while etcd has lost its quorum (2 of 3 members
// killed), all at once: each ends within 6 s with exit status 1 and `etcd unreachable`, and
// none changed anything (docs/cluster.md, "etcd without a quorum"). An up whose quorum goes while it
// waits for convergence ends as soon, saying its generation was written; when the quorum is
// back the cluster converges to it.
func testQuorumLost(t *testing.T, k *clusterOf, ctxFile string, up func(string) cliRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before, err := k.s.Network(ctx, "t1", "two")
	if err != nil {
		t.Fatal(err)
	}
	k.etcd.Kill(1)
	k.etcd.Kill(2)
	changed := writeTopo(t, fmt.Sprintf(raceTopo, 3))
	verbs := [][]string{{"up", changed}, {"diff", changed}, {"down", "two"}, {"ls"}, {"inspect", "two"}, {"exec", "two", "a", "--", "true"}, {"link", "two", "ab", "down"}}
	runs := make([]cliRun, len(verbs))
	var wg sync.WaitGroup
	for i, v := range verbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = k.m.runFor(t, time.Minute, 1, append([]string{"--cluster", ctxFile}, v...)...)
		}()
	}
	wg.Wait()
	for i, v := range verbs {
		r := runs[i]
		t.Logf("quorum lost: %s: %v", strings.Join(v, " "), r)
		if r.status != 1 || !strings.Contains(r.errOut, "trellis: cluster: etcd unreachable at [") || r.took > 6*time.Second {
			t.Errorf("%s with etcd's quorum lost: %v\nwant exit status 1 and `etcd unreachable` within 6s", strings.Join(v, " "), r)
		}
	}
	k.m.ping(t, 1, agent.LocalName("t1", "two"), "a", "10.0.1.2") // the data plane goes on

	// Quorum back: nothing of the above changed anything; then an up that loses the quorum
	// while it waits (the agents, and so the placer, stopped meanwhile).
	k.quorumBack(t)
	if now, err := k.s.Network(ctx, "t1", "two"); err != nil || now.Revision != before.Revision {
		t.Fatalf("after the verbs without a quorum the network is %+v (%v), want generation %d as before", now, err, before.Revision)
	}
	if got := k.m.inspect(t, 1, agent.LocalName("t1", "two")).link(t, "ab").Endpoints; len(got) == 0 || got[0].State == "down" {
		t.Errorf("link ab after `link two ab down` without a quorum: %+v, want it up", got)
	}
	lost := k.loseQuorumSoon()
	r := up(changed)
	after := time.Since(<-lost)
	t.Logf("quorum lost while up waits: up ended %v after it, %v", after.Round(time.Millisecond), r)
	gen := generationOf(r.errOut)
	if r.status != 1 || gen <= before.Revision || !strings.Contains(r.errOut, fmt.Sprintf("trellis: network two: generation %d was written, but waiting for it to converge stopped: cluster: etcd unreachable", gen)) ||
		after > 6*time.Second {
		t.Errorf("up that lost etcd's quorum while waiting: %v\nwant exit status 1 within 6s, saying the generation was written and etcd is unreachable", r)
	}
	k.quorumBack(t)
	k.converged(t, "two", gen)
	if got := k.m.inspect(t, 1, agent.LocalName("t1", "two")).link(t, "ab").Rate; got != "3mbit" {
		t.Errorf("after the quorum came back, link ab's rate is %s, want the written generation's 3mbit", got)
	}

	// The same for down, whose wait for the machines to let the network go loses the quorum.
	lost = k.loseQuorumSoon()
	r = k.m.runFor(t, time.Minute, 1, "--cluster", ctxFile, "down", "two")
	after = time.Since(<-lost)
	t.Logf("quorum lost while down waits: down ended %v after it, %v", after.Round(time.Millisecond), r)
	if r.status != 1 || !strings.Contains(r.errOut, "trellis: network two was removed from the cluster, but waiting for its machines to let it go stopped: cluster: etcd unreachable") ||
		after > 6*time.Second {
		t.Errorf("down that lost etcd's quorum while waiting: %v\nwant exit status 1 within 6s, saying etcd is unreachable", r)
	}
	k.quorumBack(t)
	waitFor(t, 30*time.Second, "network two gone from the machines", func() (bool, string) {
		sts, err := k.s.Statuses(ctx, "t1", "two")
		return err == nil && len(sts) == 0, fmt.Sprint(sts, err)
	})
}

// loseQuorumSoon stops the agents (and so the placer) at once and, a second later, kills two
// of etcd's three members and lets the agents go on: a command started now waits on its
// machines when the quorum goes. It sends the time the quorum went.
func (k *clusterOf) loseQuorumSoon() <-chan time.Time {
	agents := []int{k.agents[1].cmd.Process.Pid, k.agents[2].cmd.Process.Pid}
	for _, p := range agents {
		syscall.Kill(p, syscall.SIGSTOP)
	}
	lost := make(chan time.Time, 1)
	time.AfterFunc(time.Second, func() {
		k.etcd.Kill(1)
		k.etcd.Kill(2)
		lost <- time.Now()
		for _, p := range agents {
			syscall.Kill(p, syscall.SIGCONT)
		}
	})
	return lost
}

// quorumBack starts the two killed members again and waits until etcd answers.
func (k *clusterOf) quorumBack(t *testing.T) {
	t.Helper()
	k.etcd.Restart(1)
	k.etcd.Restart(2)
	if err := k.etcd.WaitHealthy(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}
