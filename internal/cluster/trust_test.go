package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestTrust checks, on a 3-member etcd set up as docs/cluster.md says, that each identity
// reaches only what it is for (docs/security.md, "A tenant" and "A host on the underlay"): a
// tenant's certificate gets nothing from etcd's peer port, nor another identity's leases from
// the client port; an agent writes only its own machine's registration and reports; no tenant
// name makes another certificate the tenant's.
func TestTrust(t *testing.T) {
	c := etcdtest.Start(t, 3)
	root := New(c.Client())
	ctx := ctxT(t)
	for _, m := range []string{"m1", "m2"} {
		if err := root.AddAgent(ctx, m, false); err != nil {
			t.Fatal(err)
		}
	}
	aliceFiles := tenantFiles(t, c, root, &Tenant{Name: "alice"})
	alice := filesStore(t, c, aliceFiles)
	bob := addTenant(t, c, root, &Tenant{Name: "bob"})
	agent1, agent2 := clientStore(t, c, AgentUser("m1")), clientStore(t, c, AgentUser("m2"))
	reg, err := agent2.Register(ctx, &Machine{Name: "m2", Cores: 1}, 5*time.Second)
	if err != nil {
		t.Fatalf("agent m2 registers m2: %v", err)
	}
	defer reg.Close(context.WithoutCancel(ctx))
	if err := agent2.PutStatus(ctx, &Status{Tenant: "bob", Network: "lab", Machine: "m2", State: Converged}, reg.Lease); err != nil {
		t.Fatalf("agent m2 reports bob's lab: %v", err)
	}
	t.Run("peer port", func(t *testing.T) { testPeerPort(t, c, filesTLS(t, aliceFiles), reg.Lease) })
	t.Run("leases", func(t *testing.T) { testLeases(t, alice, reg.Lease) })
	t.Run("agents", func(t *testing.T) { testAgents(t, agent1, agent2, reg.Lease) })
	t.Run("tenant names", func(t *testing.T) { testTenantNames(t, c, root, bob) })
}

// peerDo sends a request to a member's peer port with TLS configuration tc, as etcd's peers do.
func peerDo(t *testing.T, tc *tls.Config, method, url string, body []byte) (int, error) {
	t.Helper()
	cl := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/protobuf")
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// filesTLS reads certificate files into a client's TLS configuration that trusts any server
// (the probe is about what the server lets in).
func filesTLS(t *testing.T, f pki.Files) *tls.Config {
	t.Helper()
	tc, err := f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	tc.InsecureSkipVerify = true
	return tc
}

// testPeerPort tries etcd's peer port with a tenant's certificate: the member list, and the
// renewal of a machine's lease at every member (one of them leads, and would renew it).
func testPeerPort(t *testing.T, c *etcdtest.Cluster, tenantTLS *tls.Config, lease clientv3.LeaseID) {
	peer := pki.Files{CA: filepath.Join(c.Dir, "peer-ca.crt"), Cert: filepath.Join(c.Dir, "m1-peer.crt"), Key: filepath.Join(c.Dir, "m1-peer.key")}
	if code, err := peerDo(t, filesTLS(t, peer), http.MethodGet, c.PeerEndpoints[1]+"/members", nil); err != nil || code != http.StatusOK {
		t.Fatalf("a member's peer certificate asks another member for /members: %d, %v; want 200 (else the probes below prove nothing)", code, err)
	}
	renew, _ := (&pb.LeaseKeepAliveRequest{ID: int64(lease)}).Marshal()
	for i, ep := range c.PeerEndpoints {
		for _, probe := range []struct {
			what, method, path string
			body               []byte
		}{
			{"list the members", http.MethodGet, "/members", nil},
			{"renew machine m2's lease", http.MethodPost, "/leases", renew},
		} {
			t.Run(fmt.Sprintf("%s at member %d", probe.what, i+1), func(t *testing.T) {
				code, err := peerDo(t, tenantTLS, probe.method, ep+probe.path, probe.body)
				if err == nil {
					t.Errorf("a tenant's certificate on the peer port: answered %d; want the TLS handshake refused", code)
				}
			})
		}
	}
}

// testLeases tries, as a tenant on the client port, every lease call on a machine's lease.
func testLeases(t *testing.T, tenant *Store, lease clientv3.LeaseID) {
	ctx := ctxT(t)
	cli := tenant.Client()
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"renew it", func() error { _, err := cli.KeepAliveOnce(ctx, lease); return err }},
		{"revoke it", func() error { _, err := cli.Revoke(ctx, lease); return err }},
		{"read its keys", func() error { _, err := cli.TimeToLive(ctx, lease, clientv3.WithAttachedKeys()); return err }},
		{"list every lease", func() error { _, err := cli.Leases(ctx); return err }},
		{"put its own network under it", func() error {
			_, err := cli.Put(ctx, NetworkKey("alice", "leased"), "{}", clientv3.WithLease(lease))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !isDenied(err) {
				t.Errorf("got %v, want permission denied", err)
			}
		})
	}
	// What a tenant can do with leases: grant its own (etcd has no permission for that), as
	// it can write keys under its own prefix. Measured here, bounded as those writes are.
	n, start := 0, time.Now()
	for time.Since(start) < 500*time.Millisecond {
		l, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Revoke(context.WithoutCancel(ctx), l.ID)
		n++
	}
	t.Logf("a tenant granted %d leases of its own in 0.5 s (one at a time)", n)
}

// testAgents tries, as machine m1's agent, to write machine m2's registration and reports.
func testAgents(t *testing.T, a1, a2 *Store, lease2 clientv3.LeaseID) {
	ctx := ctxT(t)
	cli := a1.Client()
	reg, err := a1.Register(ctx, &Machine{Name: "m1", Cores: 1}, 5*time.Second)
	if err != nil {
		t.Fatalf("agent m1 registers m1: %v", err)
	}
	defer reg.Close(context.WithoutCancel(ctx))
	if err := a1.PutStatus(ctx, &Status{Tenant: "alice", Network: "lab", Machine: "m1", State: Converged}, reg.Lease); err != nil {
		t.Errorf("agent m1 reports alice's lab on m1: %v", err)
	}
	if err := a1.PutStatus(ctx, &Status{Tenant: DefaultTenant, Network: "lab", Machine: "m1", State: Converged}, reg.Lease); err != nil {
		t.Errorf("agent m1 reports the administrator's lab on m1: %v", err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"register m2", func() error { _, err := a1.Register(ctx, &Machine{Name: "m2", Cores: 1}, 5*time.Second); return err }},
		{"overwrite m2's registration", func() error { _, err := cli.Put(ctx, MachineKey("m2"), "{}"); return err }},
		{"delete m2's registration", func() error { _, err := cli.Delete(ctx, MachineKey("m2")); return err }},
		{"register a machine of no agent", func() error { _, err := cli.Put(ctx, MachineKey("m9"), "{}"); return err }},
		{"report bob's lab on m2", func() error {
			return a1.PutStatus(ctx, &Status{Tenant: "bob", Network: "lab", Machine: "m2", State: Failed}, 0)
		}},
		{"delete m2's report", func() error { return a1.DeleteStatus(ctx, "bob", "lab", "m2") }},
		{"report the administrator's lab on m2", func() error {
			return a1.PutStatus(ctx, &Status{Tenant: DefaultTenant, Network: "lab", Machine: "m2", State: Failed}, 0)
		}},
		{"renew m2's lease", func() error { _, err := cli.KeepAliveOnce(ctx, lease2); return err }},
		{"revoke m2's lease", func() error { _, err := cli.Revoke(ctx, lease2); return err }},
		{"write a placement (the placer's)", func() error { _, err := cli.Put(ctx, PlacementKey("bob", "lab"), "{}"); return err }},
		{"write a network", func() error { _, err := cli.Put(ctx, NetworkKey("bob", "lab"), "{}"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !isDenied(err) {
				t.Errorf("got %v, want permission denied", err)
			}
		})
	}
	if ms, _, err := a2.Machines(ctx); err == nil {
		t.Errorf("an agent lists the machines: %d, want permission denied (only placers read them)", len(ms))
	}
}

// testTenantNames checks the names no tenant may have, and that a tenant named like an etcd
// member (m1) does not make the member's certificates the tenant's.
func testTenantNames(t *testing.T, c *etcdtest.Cluster, root, bob *Store) {
	ctx := ctxT(t)
	for _, name := range []string{DefaultTenant, RootUser} {
		_, err := root.AddTenant(ctx, &Tenant{Name: name}, c.CA, time.Hour)
		if !errors.Is(err, ErrBadName) {
			t.Errorf("tenant add %s: %v, want ErrBadName (reserved)", name, err)
		}
	}
	addTenant(t, c, root, &Tenant{Name: "m1"})
	if _, err := root.Up(ctx, tenantNet("m1", "lab", 1, 1, "8M"), 0); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"m1", "m1-peer"} {
		t.Run("member certificate "+f, func(t *testing.T) {
			files := pki.Files{CA: c.Root.CA, Cert: filepath.Join(c.Dir, f+".crt"), Key: filepath.Join(c.Dir, f+".key")}
			cli, err := c.NewClient(files)
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if _, err := cli.Get(qctx, NetworkKey("m1", "lab")); err == nil {
				t.Errorf("member m1's certificate %s.crt reads tenant m1's network", f)
			}
		})
	}
	if _, err := bob.Network(ctx, "m1", "lab"); !errors.Is(err, ErrDenied) {
		t.Errorf("bob reads tenant m1's network: %v, want ErrDenied", err)
	}
}
