//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// attackPage is a page of another port of 127.0.0.1 (the same site to the browser, which
// sends it the SameSite cookie of the server's page): it posts a topology file with fetch and
// with a form (text/plain, no preflight), and opens a terminal websocket whose command would
// leave a file in the node. window.probe says what the browser saw.
const attackPage = `<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" target="sink" method="POST" enctype="text/plain" action="%[1]s/networks"><input type="hidden" name="name: %[2]s-form
nodes: {a: {}}
#" value=""></form>
<script>
window.probe = {};
fetch("%[1]s/networks", {method: "POST", mode: "no-cors", credentials: "include",
  headers: {"Content-Type": "text/plain"}, body: "name: %[2]s-fetch\nnodes: {a: {}}\n"})
  .then(() => probe.fetch = "sent", (e) => probe.fetch = "error " + e);
document.querySelector("iframe").onload = () => probe.form = "answered";
document.getElementById("f").submit();
const ws = new WebSocket("%[3]s/networks/%[4]s/nodes/a/terminal?cmd=touch&cmd=/tmp/pwned");
ws.onopen = () => probe.ws = "open";
ws.onerror = () => probe.ws = probe.ws || "refused";
</script></body></html>`

// TestWebSecurityCrossSite is the web page actor's probe in a real browser that holds the
// server page's cookie: a page of another port of 127.0.0.1 tries to make networks and open a
// terminal; a page under another name that resolves to 127.0.0.1 (DNS rebinding) reads the API.
func TestWebSecurityCrossSite(t *testing.T) {
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Fatalf("the browser probes need chromium: apt-get install chromium (%v)", err)
	}
	e := start(t)
	name := "websec" + nonce()[:4]
	registerNetwork(name)
	s, page := startServeTCP(t, e.state)
	u, _ := url.Parse(page)
	s.must(201, "POST", "/networks", "application/yaml", fmt.Sprintf(apiTopo, name))
	ctx := browser(t, 1000, 700, chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1"))

	// The user opens the server's page: the browser now holds its cookie.
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the page", "window.trellis !== undefined && document.getElementById('netlist').textContent.includes("+fmt.Sprintf("%q", name)+")", 20*time.Second)

	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, attackPage, "http://"+u.Host, name, "ws://"+u.Host, name)
	}))
	defer attacker.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(attacker.URL)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the probes", `!!(probe.fetch && probe.form && probe.ws)`, 20*time.Second)
	got, _ := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`probe`))
	if got["ws"] != "refused" {
		t.Errorf("a page of another port opened the terminal websocket: %v", got)
	}
	time.Sleep(time.Second) // the no-cors fetch's answer is not the page's to wait for
	var list struct{ Networks []struct{ Name string } }
	json.Unmarshal(s.must(200, "GET", "/networks", "", ""), &list)
	for _, n := range list.Networks {
		if strings.HasPrefix(n.Name, name+"-") {
			t.Errorf("a page of another port made network %s (probes: %v)", n.Name, got)
		}
	}
	var res struct {
		ExitCode int `json:"exit_code"`
	}
	json.Unmarshal(s.must(200, "POST", "/networks/"+name+"/nodes/a/exec", "application/json", `{"argv":["test","-e","/tmp/pwned"]}`), &res)
	if res.ExitCode == 0 {
		t.Errorf("a page of another port ran a command in a node through the terminal (/tmp/pwned is there)")
	}

	// DNS rebinding: evil.example resolves to 127.0.0.1, so a page of evil.example:PORT is
	// of the server's port; its requests name evil.example, and carry no cookie of 127.0.0.1.
	if err := chromedp.Do(ctx, chromedp.Navigate("http://evil.example:"+u.Port()+"/networks")); err != nil {
		t.Fatal(err)
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if strings.Contains(text, name) || !strings.Contains(text, "is not a name of this server") {
		t.Errorf("a page of evil.example (resolving to 127.0.0.1) read: %s", text)
	}
	s.must(204, "DELETE", "/networks/"+name, "", "")
	s.stop()
	e.assertClean()
}
