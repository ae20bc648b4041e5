package etcdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestThreeMembers starts a cluster, writes through it with one member killed, starts that
// member again, and checks that after the test nothing of it is left: no process, no file.
func TestThreeMembers(t *testing.T) {
	var pids []int
	var dir string
	t.Run("cluster", func(t *testing.T) {
		c := Start(t, 3)
		pids, dir = c.PIDs(), c.Dir
		if len(pids) != 3 {
			t.Fatalf("%d members run, want 3", len(pids))
		}
		cli := c.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		put(ctx, t, cli, "/t/a", "1")
		c.Kill(1)
		if c.Running(1) {
			t.Fatal("member 2 runs after Kill")
		}
		put(ctx, t, cli, "/t/b", "2") // two of three are a quorum
		c.Restart(1)
		if err := c.WaitHealthy(20 * time.Second); err != nil {
			t.Fatalf("after restart: %v\n%s", err, c.Logs())
		}
		resp, err := cli.Get(ctx, "/t/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 2 {
			t.Errorf("read %d keys, want 2", len(resp.Kvs))
		}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("etcd member pid %d is still there after the test (kill 0: %v)", pid, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cluster's directory %s is still there (%v)", dir, err)
	}
}

// put writes a key, trying again while the cluster elects a leader (a killed member may have
// been the leader: etcd then answers "request timed out" until a new one is elected).
func put(ctx context.Context, t *testing.T, cli *clientv3.Client, k, v string) {
	t.Helper()
	for {
		_, err := cli.Put(ctx, k, v)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTLSRefusesStrangers checks that the cluster serves only clients whose certificate its CA
// signed: none, or one of another authority, is refused.
func TestTLSRefusesStrangers(t *testing.T) {
	c := Start(t, 1)
	other, err := pki.NewCA("another CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.Issue("root", pki.Client, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key, err := stranger.Write(dir, "stranger")
	if err != nil {
		t.Fatal(err)
	}
	good, err := c.Root.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	strangerFiles := pki.Files{CA: c.Root.CA, Cert: cert, Key: key}
	strangerTLS, err := strangerFiles.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	noCert := good.Clone()
	noCert.Certificates = nil
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		ok   bool
	}{
		{"root certificate", good, true},
		{"no certificate", noCert, false},
		{"certificate of another CA", strangerTLS, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, TLS: tc.tls, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			_, err = cli.Put(ctx, "/t/x", "1")
			if (err == nil) != tc.ok {
				t.Errorf("put: %v, want success %v", err, tc.ok)
			}
		})
	}
}
