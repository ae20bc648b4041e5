// Package etcdtest starts a real etcd cluster for tests: N members on loopback ports, TLS
// between everything (certificates made in the test by internal/cluster/pki), each member a
// process of the etcd binary scripts/setup.sh builds (tools/etcd). The cluster is stopped and
// its files removed when the test ends; a member can be killed and started again.
package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/pki"
	"github.com/trellisnet/trellis/internal/testkit"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// ErrNoEtcd is returned by Binary when no etcd 3.6 or later is found.
var ErrNoEtcd = errors.New("no etcd 3.6 or later: run scripts/setup.sh (it builds one), or set TRELLIS_ETCD")

// Binary finds the etcd server: $TRELLIS_ETCD, else the newest one scripts/setup.sh built in
// its cache directory (/var/cache/trellis, or $TRELLIS_CACHE), else `etcd` on the PATH if it is
// 3.6 or later.
func Binary() (string, error) {
	if p := os.Getenv("TRELLIS_ETCD"); p != "" {
		return p, nil
	}
	cache := os.Getenv("TRELLIS_CACHE")
	if cache == "" {
		cache = "/var/cache/trellis"
	}
	found, _ := filepath.Glob(filepath.Join(cache, "etcd-v3.*", "etcd"))
	for i := len(found) - 1; i >= 0; i-- { // lexical order: newest last for 3.6.x
		if fi, err := os.Stat(found[i]); err == nil && fi.Mode()&0o111 != 0 {
			return found[i], nil
		}
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		out, _ := exec.Command(p, "--version").Output()
		if v := strings.Fields(string(out)); len(v) > 2 && !strings.HasPrefix(v[2], "3.4") && !strings.HasPrefix(v[2], "3.5") {
			return p, nil
		}
	}
	return "", ErrNoEtcd
}

// Cluster is a running etcd cluster of a test.
type Cluster struct {
	Endpoints []string  // client URLs, https://127.0.0.1:PORT, one per member
	Root      pki.Files // a client certificate of etcd's root user
	CA        *pki.CA   // the authority of the clients and the client ports, to issue more
	// PeerEndpoints are the members' peer URLs, https://HOST:PORT; only certificates of
	// PeerCA, which signs nothing but the members' peer certificates, are let in there.
	PeerEndpoints []string
	PeerCA        *pki.CA
	Dir           string

	t       testing.TB
	bin     string
	opts    Options
	members []*member
}

type member struct {
	name       string
	args       []string
	cmd        *exec.Cmd
	log        *os.File
	done       chan struct{}
	clientPort int
}

// Options place a cluster somewhere else than on this namespace's loopback.
type Options struct {
	// Host is the IPv4 address the members listen on (default 127.0.0.1).
	Host string
	// Netns is a named network namespace (ip netns) to run the members in, e.g. the underlay of
	// simulated machines; the test's own clients reach them through sockets made there.
	Netns string
}

// Start starts an n-member cluster on loopback and registers its stop with t.Cleanup. It fails
// the test if etcd does not become healthy within 20 s; a missing etcd skips the test on a
// developer machine and fails it in CI (testkit.Skip).
func Start(t testing.TB, n int) *Cluster { return StartWith(t, n, Options{}) }

// StartWith is Start with the members where opts say.
func StartWith(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	bin, err := Binary()
	if err != nil {
		testkit.Skipf(t, "%v: scripts/setup.sh builds etcd (or set TRELLIS_ETCD)", err)
	}
	c, err := launch(bin, t.TempDir(), n, opts)
	if err != nil {
		t.Fatal(err)
	}
	c.t = t
	t.Cleanup(c.stop)
	return c
}

// Launch starts an n-member cluster where opts say, with its files in dir, outside a test (the
// bench's cluster part): the caller ends it with Stop. Restart and Client need a test; use
// NewClient.
func Launch(dir string, n int, opts Options) (*Cluster, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return launch(bin, dir, n, opts)
}

// Stop kills every member of a cluster that Launch started.
func (c *Cluster) Stop() { c.stop() }

func launch(bin, dir string, n int, opts Options) (*Cluster, error) {
	c := &Cluster{bin: bin, Dir: dir, opts: opts}
	if err := c.certs(n); err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * n) // free here, and most likely in a fresh namespace too
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=https://%s:%d", i+1, opts.Host, ports[2*i+1]))
	}
	for i := range n {
		m := &member{name: fmt.Sprintf("m%d", i+1), clientPort: ports[2*i]}
		m.args = c.args(m, ports[2*i+1], strings.Join(initial, ","))
		c.members = append(c.members, m)
		c.Endpoints = append(c.Endpoints, fmt.Sprintf("https://%s:%d", opts.Host, m.clientPort))
		c.PeerEndpoints = append(c.PeerEndpoints, fmt.Sprintf("https://%s:%d", opts.Host, ports[2*i+1]))
	}
	for _, m := range c.members {
		if err := c.startMember(m); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.WaitHealthy(20 * time.Second); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w\n%s", err, c.Logs())
	}
	return c, nil
}

// certs makes the cluster's CA and the peers' own, and per member a server certificate for its
// client port (cluster CA, not a client) and a peer certificate (peer CA), and the root
// client's: as docs/cluster.md's "Certificates" says to.
func (c *Cluster) certs(n int) error {
	ca, err := pki.NewCA("trellis test CA", 24*time.Hour)
	if err != nil {
		return err
	}
	peerCA, err := pki.NewCA("trellis test peer CA", 24*time.Hour)
	if err != nil {
		return err
	}
	c.CA, c.PeerCA = ca, peerCA
	c.Root.CA = filepath.Join(c.Dir, "ca.crt")
	if err := os.WriteFile(c.Root.CA, ca.PEM, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "peer-ca.crt"), peerCA.PEM, 0o644); err != nil {
		return err
	}
	hosts := []string{"127.0.0.1", "localhost", c.opts.Host}
	for i := range n {
		name := fmt.Sprintf("m%d", i+1)
		for _, k := range []struct {
			ca    *pki.CA
			usage pki.Usage
			file  string
		}{{ca, pki.Server, name}, {peerCA, pki.Peer, name + "-peer"}} {
			p, err := k.ca.Issue(name, k.usage, hosts, 24*time.Hour)
			if err != nil {
				return err
			}
			if _, _, err := p.Write(c.Dir, k.file); err != nil {
				return err
			}
		}
	}
	root, err := ca.Issue("root", pki.Client, nil, 24*time.Hour)
	if err != nil {
		return err
	}
	c.Root.Cert, c.Root.Key, err = root.Write(c.Dir, "root")
	return err
}

// args are the flags of member m: TLS with client certificates on both the client and the peer
// ports, the peer port trusting only the peers' CA, no HTTP gateway (trellis speaks gRPC, and
// the gateway would dial the member as a client), no fsync (a test's data need not survive a
// power cut, and fsync is slow on shared CI disks), quiet logs.
func (c *Cluster) args(m *member, peerPort int, initial string) []string {
	crt, key := filepath.Join(c.Dir, m.name+".crt"), filepath.Join(c.Dir, m.name+".key")
	pcrt, pkey := filepath.Join(c.Dir, m.name+"-peer.crt"), filepath.Join(c.Dir, m.name+"-peer.key")
	return []string{
		"--name", m.name, "--data-dir", filepath.Join(c.Dir, m.name+".etcd"),
		"--listen-client-urls", fmt.Sprintf("https://%s:%d", c.opts.Host, m.clientPort),
		"--advertise-client-urls", fmt.Sprintf("https://%s:%d", c.opts.Host, m.clientPort),
		"--listen-peer-urls", fmt.Sprintf("https://%s:%d", c.opts.Host, peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("https://%s:%d", c.opts.Host, peerPort),
		"--initial-cluster", initial, "--initial-cluster-state", "new",
		"--initial-cluster-token", filepath.Base(c.Dir),
		"--cert-file", crt, "--key-file", key, "--trusted-ca-file", c.Root.CA, "--client-cert-auth",
		"--enable-grpc-gateway=false",
		"--peer-cert-file", pcrt, "--peer-key-file", pkey, "--peer-trusted-ca-file", filepath.Join(c.Dir, "peer-ca.crt"),
		"--peer-client-cert-auth",
		"--unsafe-no-fsync", "--log-level", "warn",
	}
}

func (c *Cluster) startMember(m *member) error {
	log, err := os.OpenFile(filepath.Join(c.Dir, m.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, m.args...)
	if c.opts.Netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", c.opts.Netns, c.bin}, m.args...)...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	// The member dies with the test process, even if the test is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("etcd member %s: %w", m.name, err)
	}
	m.cmd, m.log, m.done = cmd, log, make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(m.done) }()
	return nil
}

// Kill kills member i (0-based) with SIGKILL and waits until it is gone.
func (c *Cluster) Kill(i int) {
	m := c.members[i]
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	<-m.done
	m.cmd = nil
}

// Restart starts member i again, with its data, after Kill.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	m := c.members[i]
	if m.cmd != nil {
		c.t.Fatalf("etcd member %s is running", m.name)
	}
	if err := c.startMember(m); err != nil {
		c.t.Fatal(err)
	}
}

// Client returns a client of the cluster as etcd's root user; it is closed when the test ends.
func (c *Cluster) Client() *clientv3.Client {
	c.t.Helper()
	cli, err := c.NewClient(c.Root)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// NewClient returns a client of the cluster with the given certificate files.
func (c *Cluster) NewClient(f pki.Files) (*clientv3.Client, error) {
	tc, err := f.ClientConfig()
	if err != nil {
		return nil, err
	}
	// As cluster.ClientConfig (which this package cannot import: cluster's tests import it).
	return clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints, TLS: tc, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: append(c.dialer(), grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		})),
	})
}

// WaitHealthy waits until every running member answers and the cluster has a leader.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	cli, err := c.NewClient(c.Root)
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(timeout)
	for {
		err = c.healthy(cli)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *Cluster) healthy(cli *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i, m := range c.members {
		if m.cmd == nil {
			continue
		}
		st, err := cli.Status(ctx, c.Endpoints[i])
		if err != nil {
			return fmt.Errorf("etcd member %s: %w", m.name, err)
		}
		if st.Leader == 0 {
			return fmt.Errorf("etcd member %s: no leader", m.name)
		}
	}
	_, err := cli.Get(ctx, "/trellis-health") // a linearizable read needs a quorum
	return err
}

// Logs returns the members' logs, for a failure message.
func (c *Cluster) Logs() string {
	var b bytes.Buffer
	for _, m := range c.members {
		data, _ := os.ReadFile(filepath.Join(c.Dir, m.name+".log"))
		fmt.Fprintf(&b, "--- etcd member %s:\n%s", m.name, data)
	}
	return b.String()
}

// stop ends every member. SIGKILL: the data are the test's and go with it, and members
// stopped together would wait for each other (a leader hands over its leadership first).
func (c *Cluster) stop() {
	for i := range c.members {
		c.Kill(i)
	}
}

// Running tells whether member i's process runs.
func (c *Cluster) Running(i int) bool { return c.members[i].cmd != nil }

// PIDs returns the process ids of the running members, for checks that nothing is left.
func (c *Cluster) PIDs() []int {
	var out []int
	for _, m := range c.members {
		if m.cmd != nil {
			out = append(out, m.cmd.Process.Pid)
		}
	}
	return out
}

// freePorts finds n TCP ports free on 127.0.0.1 by binding them all at once, then releasing them.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
