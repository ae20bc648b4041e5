//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The API's rows of docs/security.md, "A local unprivileged user" and "A web page in the
// user's browser": what `trellis serve --listen 127.0.0.1:PORT` lets a local user (uid 65534,
// nobody) and a page in a browser do.

// nobody is the uid and gid of the local unprivileged user of the probes.
const nobody = 65534

// asNobody runs a command as uid and gid 65534 and returns its output and error.
func asNobody(t testing.TB, name string, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is needed to probe as a local user: apt-get install %s (%v)", name, name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// curlNobody sends a request with curl as nobody and returns the status (0: no connection)
// and the body.
func curlNobody(t testing.TB, args ...string) (int, string) {
	t.Helper()
	out, _ := asNobody(t, "curl", append([]string{"-s", "-w", "\n%{http_code}", "--max-time", "10"}, args...)...)
	i := strings.LastIndex(out, "\n")
	var code int
	fmt.Sscan(out[i+1:], &code)
	return code, out[:i]
}

// traversable lets every user through the directories from the test's temporary directory
// down to dir (they are 0700), so that what keeps nobody out of the files in dir is their
// own mode and the server's checks.
func traversable(t testing.TB, dir string) {
	t.Helper()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// tcpDo sends a request to target, an address of the server's TCP listener, with the headers
// given, and returns the status and body.
func tcpDo(t testing.TB, method, target, ctype, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestAPISecurityLocalUser probes a loopback listener as a local user and as a page in a
// browser: nothing without the token, no other name, no other origin, no form, no host path.
func TestAPISecurityLocalUser(t *testing.T) {
	e := start(t)
	name := "apisec" + nonce()[:4]
	registerNetwork(name)
	s, page := startServeTCP(t, e.state)
	u, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	base, token := "http://"+u.Host, u.Query().Get("token")
	bearer := map[string]string{"Authorization": "Bearer " + token}
	tokenFile := filepath.Join(e.state, "api-token")
	traversable(t, e.state)

	t.Run("the token file is root's, mode 0600, and holds the printed token", func(t *testing.T) {
		fi, err := os.Stat(tokenFile)
		if err != nil {
			t.Fatalf("no token file: %v", err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || st.Uid != 0 {
			t.Errorf("token file %s: mode %04o uid %d, want 0600 root", tokenFile, fi.Mode().Perm(), st.Uid)
		}
		data, _ := os.ReadFile(tokenFile)
		if tok := strings.TrimSpace(string(data)); len(tok) < 32 || tok != token {
			t.Errorf("token file holds %q, the printed address %q", tok, page)
		}
		if out, err := asNobody(t, "cat", tokenFile); err == nil {
			t.Errorf("nobody read the token file: %q", out)
		}
	})
	t.Run("nobody without the token gets 401", func(t *testing.T) {
		if code, body := curlNobody(t, base+"/networks"); code != 401 || !strings.Contains(body, "Authorization: Bearer") {
			t.Errorf("GET /networks as nobody: %d %s, want 401 saying how to authenticate", code, body)
		}
		topo := fmt.Sprintf(apiTopo, name)
		if code, body := curlNobody(t, "-H", "Content-Type: application/yaml", "--data-binary", topo, base+"/networks"); code != 401 {
			t.Errorf("POST /networks as nobody: %d %s, want 401", code, body)
		}
		for _, path := range []string{"/metrics", "/openapi.json", "/"} {
			if code, _ := curlNobody(t, base+path); code != 401 {
				t.Errorf("GET %s as nobody: %d, want 401", path, code)
			}
		}
		if code, _ := curlNobody(t, "-H", "Authorization: Bearer "+strings.Repeat("A", len(token)), base+"/networks"); code != 401 {
			t.Errorf("GET /networks with another token: %d, want 401", code)
		}
		if code, body := curlNobody(t, "-H", "Authorization: Bearer "+token, base+"/networks"); code != 200 {
			t.Errorf("GET /networks with the token: %d %s, want 200", code, body)
		}
	})
	t.Run("another Host (DNS rebinding) is refused", func(t *testing.T) {
		for _, host := range []string{"evil.example", "evil.example:" + u.Port()} {
			h := map[string]string{"Host": host, "Authorization": bearer["Authorization"]}
			if code, body := tcpDo(t, "GET", base+"/networks", "", "", h); code != 421 || !strings.Contains(body, "--host evil.example") {
				t.Errorf("Host %s: %d %s, want 421 naming --host", host, code, body)
			}
		}
		if code, body := tcpDo(t, "GET", base+"/networks", "", "", map[string]string{"Host": "localhost:" + u.Port(), "Authorization": bearer["Authorization"]}); code != 200 {
			t.Errorf("Host localhost: %d %s, want 200", code, body)
		}
	})
	t.Run("a form, multipart or text/plain body is refused, and nothing is made", func(t *testing.T) {
		form := "name=" + name + "&nodes=a"
		for _, c := range []struct{ ctype, body string }{
			{"application/x-www-form-urlencoded", form},
			{"text/plain", fmt.Sprintf(apiTopo, name)},
			{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n" + fmt.Sprintf(apiTopo, name) + "\r\n--x--\r\n"},
		} {
			if code, body := tcpDo(t, "POST", base+"/networks", c.ctype, c.body, bearer); code != 415 || !strings.Contains(body, "application/yaml") {
				t.Errorf("POST /networks as %s: %d %s, want 415 naming application/yaml", c.ctype, code, body)
			}
		}
		if code, body := tcpDo(t, "POST", base+"/networks/"+name+"/nodes/a/exec", "text/plain", `{"argv":["true"]}`, bearer); code != 415 {
			t.Errorf("POST exec as text/plain: %d %s, want 415", code, body)
		}
		assertNoNetwork(t, s, e.state, name)
	})
	t.Run("files: source: /etc/shadow is refused, naming the field, and nothing is made", func(t *testing.T) {
		topo := strings.Replace(fmt.Sprintf(apiTopo, name), "a: {addresses: {eth1: [10.0.0.1/24]}}", "a:\n    addresses: {eth1: [10.0.0.1/24]}\n    files: [{path: /etc/shadow-of-the-host, source: /etc/shadow}]", 1)
		code, body := tcpDo(t, "POST", base+"/networks?file=/etc/lab.yaml", "application/yaml", topo, bearer)
		if code != 422 || !strings.Contains(body, `"field":"nodes.a.files[0].source"`) || !strings.Contains(body, "content:") {
			t.Errorf("POST /networks with source: /etc/shadow: %d %s, want 422 naming nodes.a.files[0].source and content:", code, body)
		}
		assertNoNetwork(t, s, e.state, name)
	})

	// A network for the websocket: made by root on the unix socket.
	s.must(201, "POST", "/networks", "application/yaml", fmt.Sprintf(apiTopo, name))
	t.Run("a terminal websocket only with the token and from the server's own page", func(t *testing.T) {
		ws := "ws://" + u.Host + "/networks/" + name + "/nodes/a/terminal?cmd=true"
		refused := []struct {
			what string
			opts websocket.DialOptions
			want int
		}{
			{"without the token", websocket.DialOptions{}, 401},
			{"from a page of another origin", websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://evil.example"}, "Authorization": {bearer["Authorization"]}}}, 403},
			{"from a page of another port", websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://127.0.0.1:1"}, "Authorization": {bearer["Authorization"]}}}, 403},
			{"from a rebinding page (its Host and Origin evil.example)", websocket.DialOptions{Host: "evil.example:" + u.Port(),
				HTTPHeader: http.Header{"Origin": {"http://evil.example:" + u.Port()}, "Authorization": {bearer["Authorization"]}}}, 421},
		}
		for _, r := range refused {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			c, resp, err := websocket.Dial(ctx, ws, &r.opts)
			cancel()
			if err == nil {
				c.CloseNow()
				t.Errorf("websocket %s: opened, want %d", r.what, r.want)
			} else if resp == nil || resp.StatusCode != r.want {
				t.Errorf("websocket %s: %v (%v), want %d", r.what, err, resp, r.want)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://" + u.Host}, "Authorization": {bearer["Authorization"]}}})
		if err != nil {
			t.Fatalf("websocket of the server's own origin with the token: %v", err)
		}
		defer c.CloseNow()
		if _, code, err := terminalRun(ctx, c); err != nil || code != 0 {
			t.Errorf("the terminal's command: exit %d, %v", code, err)
		}
	})
	t.Run("the unix socket serves root only", func(t *testing.T) {
		if code, body := curlNobody(t, "--unix-socket", s.socket, "http://x/networks"); code != 0 {
			t.Errorf("nobody on the unix socket (mode 0600): %d %s, want no connection", code, body)
		}
		// Were its mode wider, the server still answers only root (SO_PEERCRED).
		if err := os.Chmod(s.socket, 0o666); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(s.socket, 0o600)
		if code, body := curlNobody(t, "--unix-socket", s.socket, "http://x/networks"); code != 403 || !strings.Contains(body, "root only") {
			t.Errorf("nobody on the unix socket made 0666: %d %s, want 403", code, body)
		}
	})
	s.must(204, "DELETE", "/networks/"+name, "", "")
	s.stop()

	t.Run("a restarted server keeps its token", func(t *testing.T) {
		s2, page2 := startServeTCP(t, e.state)
		defer s2.stop()
		if u2, _ := url.Parse(page2); u2.Query().Get("token") != token {
			t.Errorf("the token after a restart %q, before %q", page2, page)
		}
	})
	e.assertClean()
}

// assertNoNetwork fails the test if the server lists network name or the state directory has
// a record of it.
func assertNoNetwork(t testing.TB, s *apiServer, stateDir, name string) {
	t.Helper()
	if l := string(s.must(200, "GET", "/networks", "", "")); strings.Contains(l, `"`+name+`"`) {
		t.Errorf("a refused request made network %s: %s", name, l)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "networks", name+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused request left a record of %s (%v)", name, err)
	}
}
