package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// testAccess lets the test servers' clients in: they reach 127.0.0.1 with the token.
var testAccess = Access{Token: []byte("0123456789abcdef0123456789abcdef-test"), Hosts: []string{"127.0.0.1", "localhost"}, Cookie: "trellis-token-test"}

// TestGuard checks who a TCP listener lets in: only a request with the token (bearer, or the
// page's cookie), naming the server by one of its names, from no page of another origin.
func TestGuard(t *testing.T) {
	tok := "Bearer " + string(testAccess.Token)
	cookie := testAccess.Cookie + "=" + string(testAccess.Token)
	cases := []struct {
		name, method, path string
		header             map[string]string
		status             int
		detail             string
	}{
		{"no token", "GET", "/networks", nil, 401, "needs its token"},
		{"no token, up", "POST", "/networks", map[string]string{"Content-Type": "application/yaml"}, 401, "needs its token"},
		{"a wrong token", "GET", "/networks", map[string]string{"Authorization": "Bearer " + strings.Repeat("x", 37)}, 401, "not this server's"},
		{"a token one character short", "GET", "/networks", map[string]string{"Authorization": tok[:len(tok)-1]}, 401, "not this server's"},
		{"basic, not bearer", "GET", "/networks", map[string]string{"Authorization": "Basic dTpw"}, 401, "needs its token"},
		{"the token", "GET", "/networks", map[string]string{"Authorization": tok}, 200, ""},
		{"the token, bearer in lower case", "GET", "/networks", map[string]string{"Authorization": "bearer " + string(testAccess.Token)}, 200, ""},
		{"the page's cookie", "GET", "/networks", map[string]string{"Cookie": cookie}, 200, ""},
		{"a wrong cookie", "GET", "/networks", map[string]string{"Cookie": testAccess.Cookie + "=nope"}, 401, "needs its token"},
		{"the token in the address of an API path", "GET", "/networks?token=" + string(testAccess.Token), nil, 401, "needs its token"},
		{"a wrong token in the page's address", "GET", "/?token=nope", nil, 401, "open the address trellis serve printed"},
		{"another name (DNS rebinding)", "GET", "/networks", map[string]string{"Authorization": tok, "Host": "evil.example"}, 421, "--host evil.example"},
		{"another name, with the port", "GET", "/networks", map[string]string{"Authorization": tok, "Host": "evil.example:8080"}, 421, "is not a name of this server"},
		{"localhost", "GET", "/networks", map[string]string{"Authorization": tok, "Host": "LOCALHOST."}, 200, ""},
		{"a page of another origin", "POST", "/networks", map[string]string{"Cookie": cookie, "Origin": "http://evil.example", "Content-Type": "application/yaml"}, 403, "http://evil.example is refused"},
		{"a page of another port", "GET", "/networks", map[string]string{"Cookie": cookie, "Origin": "http://127.0.0.1:1"}, 403, "is refused"},
		{"an opaque origin", "DELETE", "/networks/x", map[string]string{"Cookie": cookie, "Origin": "null"}, 403, "is refused"},
		{"a fetch from another site", "GET", "/networks", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, 403, "another site or port"},
		{"an image from another port", "GET", "/networks", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}, 403, "another site or port"},
		{"a form from another site", "POST", "/networks", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
			"Content-Type": "application/x-www-form-urlencoded"}, 403, "another site or port"},
		{"a link from another site", "GET", "/networks", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, 200, ""},
		{"the page's own call", "PUT", "/networks/nope/links/l/state", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-origin",
			"Content-Type": "application/json", "Origin": "http://HOST"}, 404, "no network named nope"},
	}
	srv, _ := newTestServer(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := ""
			if c.method == "PUT" {
				body = `{"state":"down"}`
			}
			req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(body))
			for k, v := range c.header {
				req.Header.Set(k, strings.ReplaceAll(v, "HOST", host))
			}
			if h := c.header["Host"]; h != "" {
				req.Host = h
			}
			status, data := send(t, req)
			if status != c.status || !strings.Contains(data, c.detail) {
				t.Errorf("%d %s, want %d with %q", status, data, c.status, c.detail)
			}
		})
	}
}

func send(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("a 401 without WWW-Authenticate")
	}
	return resp.StatusCode, b.String()
}

// TestGuardPageToken opens the page's address with the token: the browser gets the cookie
// (HttpOnly, SameSite=Strict, Path=/) and is sent to the address without the token.
func TestGuardPageToken(t *testing.T) {
	srv, _ := newTestServer(t)
	req, _ := http.NewRequest("GET", srv.URL+"/?token="+string(testAccess.Token)+"&x=1", nil)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?x=1" {
		t.Fatalf("%s to %q, want 303 to /?x=1", resp.Status, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 || cs[0].Name != testAccess.Cookie || cs[0].Value != string(testAccess.Token) || !cs[0].HttpOnly ||
		cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" {
		t.Errorf("cookies %+v", cs)
	}
	if sc := resp.Header.Get("Set-Cookie"); !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Errorf("Set-Cookie %q", sc)
	}
}

// TestGuardNoAccess: a server whose Access is not set lets no TCP client in.
func TestGuardNoAccess(t *testing.T) {
	srv := httptest.NewServer(New(context.Background(), nil, Options{}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer ")
	if status, data := send(t, req); status != 421 {
		t.Errorf("%d %s, want 421", status, data)
	}
}

// TestGuardUnixRoot: root on the unix socket needs no token and no Host, and may name paths
// of this machine; the body's media type is checked there too.
func TestGuardUnixRoot(t *testing.T) {
	testkit.RequireRoot(t) // the peer of the unix socket is this process
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: New(context.Background(), nil, Options{}), ConnContext: ConnContext}
	go srv.Serve(l)
	defer srv.Close()
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequest("GET", "http://evil.example/openapi.json", nil)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("root on the socket: %s, want 200", resp.Status)
	}
	req, _ = http.NewRequest("POST", "http://x/networks", strings.NewReader("name=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Errorf("a form on the socket: %s, want 415", resp.Status)
	}
}

// TestLoadToken: the first load makes the file (0600) with a new token, the next reads the
// same; a file others may read, a link, or a short token is refused.
func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api-token")
	tok, err := LoadToken(path)
	if err != nil || len(tok) < 43 {
		t.Fatalf("LoadToken: %q %v", tok, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	again, err := LoadToken(path)
	if err != nil || string(again) != string(tok) {
		t.Errorf("second LoadToken: %q %v, want the same token", again, err)
	}
	other, _ := LoadToken(filepath.Join(dir, "other"))
	if string(other) == string(tok) {
		t.Errorf("two token files with one token")
	}
	bad := []struct {
		name, content string
		mode          os.FileMode
		msg           string
	}{
		{"readable by others", string(tok), 0o644, "chmod 600"},
		{"readable by the group", string(tok), 0o640, "chmod 600"},
		{"too short", "short", 0o600, "at least 32 characters"},
		{"a space in it", strings.Repeat("a", 20) + " " + strings.Repeat("b", 20), 0o600, "at least 32 characters"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tok")
			os.WriteFile(p, []byte(b.content), b.mode)
			os.Chmod(p, b.mode)
			if _, err := LoadToken(p); err == nil || !strings.Contains(err.Error(), b.msg) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %v, want one naming %s with %q", err, p, b.msg)
			}
		})
	}
	link := filepath.Join(dir, "link")
	os.Symlink(path, link)
	if _, err := LoadToken(link); err == nil {
		t.Errorf("a link to a token file is taken")
	}
}
