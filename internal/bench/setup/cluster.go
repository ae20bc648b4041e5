package setup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/state"
)

// ClusterBed is the cluster part's testbed, as the cluster integration tests make it: simulated
// machines m1..mN (network namespaces) whose eth0 hang on a bridge in an underlay namespace, a
// 3-member etcd with TLS in the underlay, and on each machine one `trellis agent --placer` (one
// placer leads). The rig it was made for removes it all at Close.
type ClusterBed struct {
	Store   *cluster.Store
	Context string // the --cluster file of tenant "bench"
	Lease   time.Duration
	ul      string // the underlay namespace
	ms      []*simMachine
	agents  []*exec.Cmd
	etcd    *etcdtest.Cluster
}

// NewCluster makes a ClusterBed of n machines with agents' lease lease, for rig g.
func (h *Harness) NewCluster(g *Rig, n int, lease time.Duration) (*ClusterBed, error) {
	hosts := []string{"ul"}
	for i := 1; i <= n; i++ {
		hosts = append(hosts, fmt.Sprintf("m%d", i))
	}
	ms, err := h.newMachines(g, nil, hosts...)
	if err != nil {
		return nil, err
	}
	b := &ClusterBed{ul: ms[0].netns, ms: ms[1:], agents: make([]*exec.Cmd, n), Lease: lease}
	etcdAddr := fmt.Sprintf("198.18.%d.254", 100+h.machines%100)
	cmds := [][]string{{"link", "set", "lo", "up"}, {"link", "add", "ul", "type", "bridge"}, {"link", "set", "ul", "up"}, {"addr", "add", etcdAddr + "/24", "dev", "ul"}}
	for _, m := range b.ms {
		cmds = append(cmds, []string{"link", "add", m.host, "type", "veth", "peer", "name", "eth0", "netns", m.netns},
			[]string{"link", "set", m.host, "master", "ul", "up"})
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", append([]string{"-n", b.ul}, c...)...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("underlay: ip %s: %v: %s", strings.Join(c, " "), err, strings.TrimSpace(string(out)))
		}
	}
	for _, m := range b.ms {
		if err := m.underlayUp(); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(h.Work, "etcd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if b.etcd, err = etcdtest.Launch(dir, 3, etcdtest.Options{Host: etcdAddr, Netns: b.ul}); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	g.onClose(func() error { b.etcd.Stop(); return nil })
	cli, err := b.etcd.NewClient(b.etcd.Root)
	if err != nil {
		return nil, err
	}
	b.Store = cluster.New(cli)
	g.onClose(b.Store.Close)
	b.Context = filepath.Join(h.Work, "cluster.yaml")
	r := b.etcd.Root
	text := fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\ntenant: bench\n", strings.Join(b.etcd.Endpoints, ", "), r.CA, r.Cert, r.Key)
	if err := os.WriteFile(b.Context, []byte(text), 0o600); err != nil {
		return nil, err
	}
	g.onClose(b.downAll) // after the agents are killed (closers run in reverse)
	for i := range b.ms {
		if err := b.startAgent(i); err != nil {
			return nil, err
		}
		g.onClose(func() error { b.Lose(i + 1); return nil })
	}
	return b, b.waitMachines(n)
}

// startAgent starts the agent of machine i (0-based).
func (b *ClusterBed) startAgent(i int) error {
	m, r := b.ms[i], b.etcd.Root
	self := m.bin
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return err
		}
	}
	log, err := os.Create(filepath.Join(m.work, "agent-"+m.host+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command("ip", "netns", "exec", m.netns, self, "--state-dir", m.state, "agent", "--placer",
		"--etcd", strings.Join(b.etcd.Endpoints, ","), "--machine", m.host, "--address", m.addr,
		"--lease", b.Lease.String(), "--counters", "0", "--listen", "",
		"--cacert", r.CA, "--cert", r.Cert, "--key", r.Key)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("agent of %s: %w", m.host, err)
	}
	b.agents[i] = cmd
	return nil
}

// waitMachines waits until n machines are registered.
func (b *ClusterBed) waitMachines(n int) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ms, _, err := b.Store.Machines(ctx)
		cancel()
		if err == nil && len(ms) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d machines registered after 20s (%v); agent logs in the work directory", len(ms), n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Machine is the name of machine i (1-based).
func (b *ClusterBed) Machine(i int) string { return b.ms[i-1].host }

// Trellis runs `trellis --cluster CONTEXT args...` on machine m1.
func (b *ClusterBed) Trellis(args ...string) error {
	return b.ms[0].trellis(append([]string{"--cluster", b.Context}, args...)...)
}

// Lose loses machine i (1-based): its agent is killed and its cable pulled. Its nodes keep
// running until Close.
func (b *ClusterBed) Lose(i int) {
	if a := b.agents[i-1]; a != nil {
		syscall.Kill(-a.Process.Pid, syscall.SIGKILL)
		a.Wait()
		b.agents[i-1] = nil
	}
	exec.Command("ip", "-n", b.ul, "link", "set", b.ms[i-1].host, "down").Run()
}

// downAll takes every network that a machine holds down there, its agent gone.
func (b *ClusterBed) downAll() error {
	var errs []error
	for _, m := range b.ms {
		st, err := state.Open(m.state)
		if err != nil {
			continue // the machine's agent never made its state directory
		}
		recs, err := st.List()
		if err != nil || len(recs) == 0 {
			errs = append(errs, err)
			continue
		}
		// --all takes every record of the machine down, the agent's TENANT.NETWORK ones too.
		if err := m.trellis("down", "--all"); err != nil {
			errs = append(errs, err)
			for _, r := range recs {
				m.killNodes(st, r.Name)
			}
		}
	}
	return errors.Join(errs...)
}
