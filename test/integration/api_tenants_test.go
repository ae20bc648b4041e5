//go:build integration

package integration

// The API of a cluster (trellis serve --cluster): each tenant, by its client certificate, sees
// and changes exactly its own networks; what is not granted is refused and changes nothing.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// tlsClient is an HTTPS client of the cluster's API with certificate files f (no certificate
// if f.Cert is empty), trusting the cluster's CA.
type tlsClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newTLSClient(t *testing.T, base string, f pki.Files) *tlsClient {
	t.Helper()
	var tc *tls.Config
	var err error
	if f.Cert != "" {
		tc, err = f.ClientConfig()
	} else { // trusts the server, presents no certificate
		var ca []byte
		if ca, err = os.ReadFile(f.CA); err == nil {
			tc = &tls.Config{RootCAs: x509.NewCertPool()}
			tc.RootCAs.AppendCertsFromPEM(ca)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return &tlsClient{t: t, base: base, c: &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 3 * time.Minute}}
}

// do sends a request (with header Trellis-Tenant if tenant is set) and returns the status and
// body; a connection refused in TLS is an error.
func (c *tlsClient) do(method, path, tenant, body string) (int, string, error) {
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	if tenant != "" {
		req.Header.Set("Trellis-Tenant", tenant)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), nil
}

func (c *tlsClient) must(want int, method, path, tenant, body string) string {
	c.t.Helper()
	status, data, err := c.do(method, path, tenant, body)
	if err != nil || status != want {
		c.t.Fatalf("%s %s: %d %v, want %d\n%s", method, path, status, err, want, data)
	}
	return data
}

// listed returns "tenant/name" of each network GET /networks lists.
func (c *tlsClient) listed(tenant string) []string {
	c.t.Helper()
	var l struct {
		Networks []struct{ Name, Tenant string }
	}
	if err := json.Unmarshal([]byte(c.must(200, "GET", "/networks", tenant, "")), &l); err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, n := range l.Networks {
		out = append(out, n.Tenant+"/"+n.Name)
	}
	return out
}

// startClusterServe starts `trellis serve --cluster` with the administrator's context on a
// free loopback port, and returns its base URL.
func startClusterServe(t *testing.T, c *etcdtest.Cluster, stateDir string, server pki.Files) string {
	t.Helper()
	ctxFile := filepath.Join(t.TempDir(), "admin.yaml")
	data := fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\n", strings.Join(c.Endpoints, ", "), c.Root.CA, c.Root.Cert, c.Root.Key)
	if err := os.WriteFile(ctxFile, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(trellisBin, "--state-dir", stateDir, "--cluster", ctxFile, "serve", "--quiet", "--listen", addr,
		"--tls-cert", server.Cert, "--tls-key", server.Key)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		if err := waitCmd(cmd, 30*time.Second); err != nil {
			t.Errorf("trellis serve --cluster: %v\n%s", err, out.String())
		}
	})
	waitFor(t, 10*time.Second, "trellis serve --cluster answering", func() (bool, string) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
		}
		return err == nil, out.String()
	})
	return "https://" + addr
}

const tenantTopo = `name: %s
nodes:
  a: {addresses: {eth1: [10.0.0.1/24]}}
  b: {addresses: {eth1: [10.0.0.2/24]}}
%s
links:
  - name: ab
    endpoints: [a:eth1, b:eth1]
`

func TestAPIClusterTenants(t *testing.T) {
	e := start(t)
	registerNetwork(agent.LocalName("alice", "lab"))
	registerNetwork(agent.LocalName("bob", "bnet"))
	c := etcdtest.Start(t, 1)
	root := cluster.New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	files := map[string]pki.Files{}
	for _, tn := range []string{"alice", "bob", "carol"} {
		files[tn] = tenantAs(t, c, root, tn, cluster.Quota{Nodes: 2})
	}
	if err := root.RemoveTenant(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	agentFiles := agentAs(t, c, root, "m1")
	ag := startAgentAs(t, c, agentFiles, e.state, "m1", "127.0.0.1", "--placer", "--listen", "127.0.0.1:0")
	base := startClusterServe(t, c, e.state, certAs(t, c.CA, c.Root.CA, "trellis-api", pki.Server, []string{"127.0.0.1"}))
	alice, bob := newTLSClient(t, base, files["alice"]), newTLSClient(t, base, files["bob"])
	admin := newTLSClient(t, base, c.Root)

	alice.must(201, "POST", "/networks?file=lab.yaml", "", fmt.Sprintf(tenantTopo, "lab", ""))
	bob.must(201, "POST", "/networks?file=bnet.yaml", "", fmt.Sprintf(tenantTopo, "bnet", ""))
	if got := fmt.Sprint(alice.listed("")); got != "[alice/lab]" {
		t.Errorf("alice lists %s, want her lab alone", got)
	}
	if got := fmt.Sprint(bob.listed("")); got != "[bob/bnet]" {
		t.Errorf("bob lists %s, want his bnet alone", got)
	}
	if got := fmt.Sprint(admin.listed("")); got != "[alice/lab bob/bnet]" {
		t.Errorf("the administrator lists %s, want both", got)
	}
	var res struct {
		ExitCode int `json:"exit_code"`
		Stdout   string
	}
	ping := `{"argv":["ping","-c1","-W2","10.0.0.2"]}`
	json.Unmarshal([]byte(bob.must(200, "POST", "/networks/bnet/nodes/a/exec", "", ping)), &res)
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "1 received") {
		t.Fatalf("bob's ping through the API: %+v", res)
	}
	testOwnNetwork(t, alice, ping)
	bobNet, err := root.Network(ctx, "bob", "bnet")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("another tenant's network, on every verb", func(t *testing.T) {
		for _, path := range []string{"/networks/bnet", "/networks/nope"} {
			name := strings.TrimPrefix(path, "/networks/")
			for _, r := range []struct{ method, path, body string }{
				{"GET", path, ""},
				{"DELETE", path, ""},
				{"PUT", path + "/links/ab/state", `{"state":"down"}`},
				{"PUT", path + "/links/ab/impairments", `{"loss":50}`},
				{"POST", path + "/nodes/a/exec", `{"argv":["true"]}`},
				{"GET", path + "/nodes/a/terminal", ""},
				{"GET", path + "/links/ab/capture?count=1", ""},
			} {
				status, body, err := alice.do(r.method, r.path, "", r.body)
				want := "tenant alice has no network " + name + " in the cluster"
				if err != nil || status != 404 || !strings.Contains(body, want) || !strings.Contains(body, `"status":404`) {
					t.Errorf("alice %s %s: %d %v %s; want 404 saying %q", r.method, r.path, status, err, body, want)
				}
			}
		}
		status, body, _ := alice.do("GET", "/networks/bnet", "bob", "")
		if status != 403 || !strings.Contains(body, "the certificate of tenant alice reaches only its own networks, not tenant bob's") {
			t.Errorf("alice naming tenant bob: %d %s", status, body)
		}
		if status, body, _ := alice.do("GET", "/networks", "bob", ""); status != 403 {
			t.Errorf("alice listing tenant bob's networks: %d %s, want 403", status, body)
		}
	})
	t.Run("credentials not granted", func(t *testing.T) {
		otherCA, err := pki.NewCA("someone else's CA", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			files  pki.Files
			status int // 0: no connection
			want   string
		}{
			{"no certificate", pki.Files{CA: c.Root.CA}, 0, "certificate"},
			{"bob's name from another CA", certAs(t, otherCA, c.Root.CA, "bob", pki.Client, nil), 0, "certificate"},
			{"an agent's certificate", agentFiles, 403, "the certificate of agent:m1 has no networks"},
			{"a name of no identity", clientAs(t, c, "mallory"), 403, "the certificate of mallory has no networks"},
			{"a removed tenant's certificate", files["carol"], 403, "tenant carol is no tenant of the cluster"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body, err := newTLSClient(t, base, tc.files).do("GET", "/networks/bnet", "", "")
				if tc.status == 0 && (err == nil || !strings.Contains(err.Error(), tc.want)) {
					t.Errorf("got %d %v %s; want no connection, an error saying %q", status, err, body, tc.want)
				}
				if tc.status != 0 && (status != tc.status || !strings.Contains(body, tc.want)) {
					t.Errorf("got %d %v %s; want %d saying %q", status, err, body, tc.status, tc.want)
				}
			})
		}
	})
	t.Run("quota", func(t *testing.T) {
		big := fmt.Sprintf(tenantTopo, "big", "  c: {}")
		status, body, err := alice.do("POST", "/networks?file=big.yaml", "", big)
		if err != nil || status != 422 || !strings.Contains(body, "over quota") || !strings.Contains(body, "nodes: 5, quota 2") {
			t.Errorf("alice's up over her quota: %d %v %s; want 422 over quota (nodes: 5, quota 2)", status, err, body)
		}
		if status, body, err := alice.do("GET", "/networks/big", "", ""); status != 404 {
			t.Errorf("alice's big after the refused up: %d %v %s, want 404", status, err, body)
		}
	})
	if n, err := root.Network(ctx, "bob", "bnet"); err != nil || n.Revision != bobNet.Revision {
		t.Errorf("bob's network after alice's tries: %v, revision %d, was %d", err, n.Revision, bobNet.Revision)
	}
	json.Unmarshal([]byte(bob.must(200, "POST", "/networks/bnet/nodes/a/exec", "", ping)), &res)
	if res.ExitCode != 0 {
		t.Errorf("bob's ping after alice's tries: %+v", res)
	}

	admin.must(404, "GET", "/networks/bnet", "", "") // the administrator's default tenant has none
	admin.must(200, "GET", "/networks/bnet", "bob", "")
	alice.must(204, "DELETE", "/networks/lab", "", "")
	admin.must(204, "DELETE", "/networks/bnet", "bob", "")
	waitFor(t, 30*time.Second, "both networks gone from the machine", func() (bool, string) {
		nets := listNetworks(t, e.state)
		return len(nets) == 0, fmt.Sprint(nets, "\n", ag.log)
	})
	ag.kill()
	e.assertClean()
}

// testOwnNetwork has alice inspect, diff and change her own network lab through the API: her
// link down stops her ping, up again lets it through; capture is not served for a cluster.
func testOwnNetwork(t *testing.T, alice *tlsClient, ping string) {
	var info struct {
		Status string
		Nodes  []struct {
			Name    string
			Running bool
			Notes   []string
		}
	}
	json.Unmarshal([]byte(alice.must(200, "GET", "/networks/lab", "", "")), &info)
	if info.Status != "up" || len(info.Nodes) != 2 || !info.Nodes[0].Running || fmt.Sprint(info.Nodes[0].Notes) != "[machine m1]" {
		t.Errorf("alice inspects lab: %+v", info)
	}
	changed := strings.Replace(fmt.Sprintf(tenantTopo, "lab", ""), "name: ab", "name: ab\n    rate: 10mbit", 1)
	if d := alice.must(200, "POST", "/diff", "", changed); !strings.Contains(d, `"op":"change","object":"link","name":"ab"`) {
		t.Errorf("alice's diff of a rate: %s", d)
	}
	var res struct {
		ExitCode int `json:"exit_code"`
	}
	for _, st := range []string{"down", "up"} {
		alice.must(200, "PUT", "/networks/lab/links/ab/state", "", fmt.Sprintf(`{"state":"%s"}`, st))
		// After the link comes back, the address resolution that failed while it was down takes
		// up to a second to start again, as on a real network (pingEventually): up to 5 s.
		for deadline := time.Now().Add(5 * time.Second); ; {
			json.Unmarshal([]byte(alice.must(200, "POST", "/networks/lab/nodes/a/exec", "", ping)), &res)
			if st == "down" || res.ExitCode == 0 || time.Now().After(deadline) {
				break
			}
		}
		if (res.ExitCode == 0) != (st == "up") {
			t.Errorf("alice's ping with her link %s: exit %d", st, res.ExitCode)
		}
	}
	if status, body, _ := alice.do("GET", "/networks/lab/links/ab/capture?count=1", "", ""); status != 501 || !strings.Contains(body, "not offered when trellis serve serves a cluster") {
		t.Errorf("alice's capture: %d %s, want 501", status, body)
	}
}
