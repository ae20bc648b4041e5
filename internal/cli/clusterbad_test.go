package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
	"github.com/trellisnet/trellis/internal/placer"
)

// TestClusterBadInput gives the CLI each kind of bad input against a cluster: each gets a
// clear error within 5 s, and nothing is created. (A tenant over quota: TestTenantCLI.)
func TestClusterBadInput(t *testing.T) {
	c := etcdtest.Start(t, 1)
	root := cluster.New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg, err := root.Register(ctx, &cluster.Machine{Name: "m1", Cores: 4, Memory: 4 << 30, Agent: "pid 1 on test"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.WithoutCancel(ctx))
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		placer.Run(pctx, placer.Config{Store: root, ID: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		close(done)
	}()
	defer func() { stop(); <-done }()

	dir := t.TempDir()
	other, _ := pki.NewCA("another CA", time.Hour)
	wrong, _ := other.Issue("root", pki.Client, nil, time.Hour)
	expired, _ := c.CA.Issue("root", pki.Client, nil, -time.Second)
	wrongCrt, wrongKey, _ := wrong.Write(dir, "wrong")
	expCrt, expKey, _ := expired.Write(dir, "expired")
	ctxFile := func(name string, eps []string, crt, key string) string {
		path := filepath.Join(dir, name+".yaml")
		os.WriteFile(path, []byte(fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\n", strings.Join(eps, ", "), c.Root.CA, crt, key)), 0o600)
		return path
	}
	good := ctxFile("good", c.Endpoints, c.Root.Cert, c.Root.Key)
	lab := filepath.Join(dir, "lab.yaml")
	os.WriteFile(lab, []byte(labTopo), 0o644)
	pinned := filepath.Join(dir, "pinned.yaml")
	os.WriteFile(pinned, []byte("name: pinned\nnodes:\n  a: {host: m9}\n  b: {}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unreachable etcd", []string{"--cluster", ctxFile("closed", []string{"https://127.0.0.1:1"}, c.Root.Cert, c.Root.Key), "up", lab},
			"etcd unreachable at [https://127.0.0.1:1] within 4s"},
		{"certificate of another CA", []string{"--cluster", ctxFile("wrong", c.Endpoints, wrongCrt, wrongKey), "up", lab}, "does it trust this certificate?"},
		{"expired certificate", []string{"--cluster", ctxFile("expired", c.Endpoints, expCrt, expKey), "up", lab}, "expired.crt expired at"},
		{"machine name registered twice", []string{"--state-dir", dir, "agent", "--etcd", strings.Join(c.Endpoints, ","), "--machine", "m1",
			"--address", "127.0.0.1", "--listen", "", "--cacert", c.Root.CA, "--cert", c.Root.Cert, "--key", c.Root.Key},
			"machine name already registered: m1 is registered by agent pid 1 on test"},
		{"placement naming an unknown machine", []string{"--cluster", good, "up", pinned},
			`refused: network pinned does not fit: does not fit: node a: host "m9" is not a registered machine (registered: m1); nothing was created`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, err := run(t, tc.args...)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v, more than 5 s", took)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\n%s\nwant an error saying %q", err, out, tc.want)
			}
			nets, _, err := root.Networks(ctx, "")
			ms, _, merr := root.Machines(ctx)
			if err != nil || merr != nil || len(nets) != 0 || len(ms) != 1 {
				t.Errorf("after it: networks %v (%v), machines %v (%v); want none and m1 alone", nets, err, ms, merr)
			}
		})
	}
}
