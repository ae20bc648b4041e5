//go:build integration

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/trellisnet/trellis/internal/testkit"
)

// startServeTCP is startServe with a loopback listener too, for a browser; it returns the
// page's address with the token, as serve prints it (http://127.0.0.1:PORT/?token=TOKEN).
func startServeTCP(t testing.TB, stateDir string, flags ...string) (*apiServer, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := startServe(t, stateDir, append([]string{"--listen", addr}, flags...)...)
	re := regexp.MustCompile(`web page: (http://` + regexp.QuoteMeta(addr) + `/\?token=[A-Za-z0-9_-]+) `)
	m := re.FindStringSubmatch(s.out.String())
	for deadline := time.Now().Add(5 * time.Second); m == nil && time.Now().Before(deadline); m = re.FindStringSubmatch(s.out.String()) {
		time.Sleep(50 * time.Millisecond)
	}
	if m == nil {
		t.Errorf("trellis serve --listen %s printed no web page address with its token:\n%s", addr, s.out.String())
		return s, "http://" + addr + "/"
	}
	return s, m[1]
}

// chromium finds Debian's chromium (scripts/test.sh installs it), or skips the test.
func chromium(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testkit.Skip(t, "no chromium: scripts/test.sh installs Debian's chromium")
	return ""
}

// browser starts a headless chromium of width x height, with the options given; the context
// ends it.
func browser(t testing.TB, width, height int, more ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.WindowSize(width, height), chromedp.Flag("disable-gpu", true))
	opts = append(opts, more...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", chromium(t), err)
	}
	return ctx
}

// logDir is where screenshots go: $CI_LOG_DIR, or /tmp/trellis-ci-logs.
func logDir(t testing.TB) string {
	dir := os.Getenv("CI_LOG_DIR")
	if dir == "" {
		dir = "/tmp/trellis-ci-logs"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(logDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("screenshot %s", path)
}

// waitJS polls the page until the expression is true, or fails the test after timeout.
func waitJS(t testing.TB, ctx context.Context, what, expr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("status").textContent`))
			screenshot(t, ctx, "web-failure.png")
			t.Fatalf("page: %s not within %v (%v); status %q", what, timeout, err, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clickElement clicks, with the mouse, the middle of a graph element as drawn on the canvas.
func clickElement(t testing.TB, ctx context.Context, id string) {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const el = trellis.graph.cy.getElementById(%q);
		const p = el.isEdge() ? el.renderedMidpoint() : el.renderedPosition();
		const r = document.getElementById("graph").getBoundingClientRect();
		return {X: r.left + p.x, Y: r.top + p.y}; })()`, id)
	pos, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ X, Y float64 }](expr))
	if err == nil {
		err = chromedp.Do(ctx, chromedp.MouseClickXY(pos.X, pos.Y))
	}
	if err != nil {
		t.Fatalf("clicking %s: %v", id, err)
	}
}

// TestWebPage drives the page in a real browser on the OSPF ring: it shows the ring's four
// routers, a click on a link and on "Take down" takes the link's carrier away in the kernel,
// a node's terminal runs a command, and the capture link downloads pcapng. Screenshots go to
// the CI log folder.
func TestWebPage(t *testing.T) {
	testkit.RequireTool(t, "bird", "scripts/setup.sh installs bird2")
	ctx := browser(t, 1400, 900)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	registerNetwork("ospf-ring")
	s, page := startServeTCP(t, e.state)
	file := filepath.Join(root, "examples/ospf-ring/ring.yaml")
	ring, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s.must(201, "POST", "/networks?file="+file, "application/yaml", string(ring))
	info := s.inspect("ospf-ring")

	if err := chromedp.Do(ctx, chromedp.Navigate(page+"#/n/ospf-ring")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the graph", "window.trellis && trellis.shown !== null", 20*time.Second)
	// The page traded the token of its address for a cookie that its scripts cannot read.
	if where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " cookie:" + document.cookie`)); strings.Contains(where, "token") ||
		!strings.HasSuffix(where, "/#/n/ospf-ring cookie:") {
		t.Errorf("the page's address and script-readable cookies %q, want the address without the token and no cookie", where)
	}
	nodes, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`trellis.graph.cy.nodes(".node").map(n => n.data("name")).sort()`))
	if strings.Join(nodes, " ") != "r1 r2 r3 r4" {
		t.Errorf("the graph's nodes: %v, want r1 r2 r3 r4", nodes)
	}
	edges, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`trellis.graph.cy.edges().length`))
	if edges != 4 {
		t.Errorf("the graph has %d edges, want the ring's 4", edges)
	}
	shown, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`trellis.shown`))
	fmt.Printf("web figures: the OSPF ring (4 nodes) shown %.0f ms after the page started\n", shown)
	// OSPF hellos move the counters: an edge gets a rate label within a few seconds.
	waitJS(t, ctx, "a rate on an edge", `trellis.graph.cy.edges().some(e => /b\/s/.test(e.data("sl")) && e.data("sl") !== "0")`, 15*time.Second)
	screenshot(t, ctx, "web-ospf-ring.png")

	const link = "r1-r2"
	port := info.link(t, link).Endpoints[0].Port
	clickElement(t, ctx, "link:"+link)
	waitJS(t, ctx, "the link's panel", `document.querySelector("#link-toggle") && document.querySelector("#link-toggle").textContent === "Take down"`, 10*time.Second)
	waitJS(t, ctx, "the link's rates", `/b\/s/.test(document.querySelector(".panel-link tbody").textContent)`, 10*time.Second)
	screenshot(t, ctx, "web-link.png") // docs/web.png is one of these
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#link-toggle"))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for carrierUp(t, port) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if carrierUp(t, port) {
		t.Errorf("port %s of %s is still up 10 s after Take down was clicked", port, link)
	}
	waitJS(t, ctx, "the link drawn down", fmt.Sprintf(`trellis.graph.cy.getElementById(%q).hasClass("down")`, "link:"+link), 10*time.Second)
	// The carrier goes before the change ends; until the page says done, the network is still
	// being changed and the DELETE below would rightly be refused (409).
	waitJS(t, ctx, "the take down done", `document.querySelector(".panel-link .msg").textContent === "taking the link down: done"`, 10*time.Second)
	screenshot(t, ctx, "web-link-down.png")

	href, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#capture-download").href`))
	if !strings.Contains(href, "/capture?") || !strings.Contains(href, "count=1000") {
		t.Errorf("capture link %q", href)
	}
	fetchCapture := `fetch(document.querySelector("#capture-download").href.replace("seconds=10", "seconds=1"))
		.then(r => r.arrayBuffer()).then(b => Array.from(new Uint8Array(b.slice(0, 4))).join(","))`
	if magic, err := chromedp.Run(ctx, chromedp.Evaluate[string](fetchCapture, chromedp.EvalAwaitPromise)); err != nil || magic != "10,13,13,10" {
		t.Errorf("the capture download starts %q (%v), want a pcapng section header", magic, err)
	}

	clickElement(t, ctx, "node:r1")
	waitJS(t, ctx, "the node's panel", `!!document.querySelector("#open-terminal")`, 10*time.Second)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#open-terminal"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the terminal's prompt", `!!window.trellisTerminal && trellisTerminal.buffer.active.getLine(0).translateToString().trim() !== ""`, 10*time.Second)
	if err := chromedp.Do(ctx, typeText("ip -br addr show eth1; echo END$((6*7))"), chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	screen := `(() => { const b = trellisTerminal.buffer.active; let s = "";
		for (let i = 0; i < b.length; i++) s += b.getLine(i).translateToString(true) + "\n"; return s; })()`
	waitJS(t, ctx, "the command's output", screen+`.includes("END42")`, 10*time.Second)
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](screen))
	if !strings.Contains(text, "10.0.12.0/31") {
		t.Errorf("terminal screen has no r1's eth1 address 10.0.12.0/31:\n%s", text)
	}
	screenshot(t, ctx, "web-terminal.png")

	s.must(204, "DELETE", "/networks/ospf-ring", "", "")
	s.stop()
	e.assertClean()
}

// typeText types text into the focused element as a keyboard's input method does
// (chromedp's key events would give xterm.js each character twice: keydown and keypress).
func typeText(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
		return err
	})
}

func carrierUp(t testing.TB, port string) bool {
	l, err := portLink(t, port)
	if err != nil {
		t.Fatalf("port %s: %v", port, err)
	}
	return l.Attrs().Flags&net.FlagUp != 0
}

// TestWebScale opens the page of a 200-node network (a ring with a chord from every tenth
// node) and prints how long the page took to show it (target: under 1 s), how long each
// second's update of the graph takes, and the frame rate while the graph is panned.
func TestWebScale(t *testing.T) {
	testkit.NotShort(t, "200 nodes")
	const n = 200
	ctx := browser(t, 1400, 900)
	e := start(t)
	name := "webscale"
	registerNetwork(name)
	s, page := startServeTCP(t, e.state)
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nnodes:\n", name)
	for i := range n {
		fmt.Fprintf(&b, "  n%d: {}\n", i)
	}
	b.WriteString("links:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - endpoints: [n%d:e1, n%d:e2]\n", i, (i+1)%n)
		if i%10 == 0 {
			fmt.Fprintf(&b, "  - endpoints: [n%d:e3, n%d:e4]\n", i, (i+n/2+5)%n)
		}
	}
	t0 := time.Now()
	s.must(201, "POST", "/networks", "application/yaml", b.String())
	t.Logf("up of %d nodes: %v", n, time.Since(t0).Round(time.Millisecond))

	var best float64
	for i := range 3 { // the first load also compiles the page's script: best of 3
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(page+"#/n/"+name)); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, "the graph", "window.trellis && trellis.shown !== null", 30*time.Second)
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`trellis.shown`))
		nodes, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`trellis.graph.cy.nodes(".node").length`))
		if nodes != n {
			t.Fatalf("the graph has %d nodes, want %d", nodes, n)
		}
		parts, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`"inspect " + Math.round(trellis.firstInspectMs) + " ms, layout " + Math.round(trellis.layoutMs) + " ms"`))
		t.Logf("load %d: shown in %.0f ms (%s)", i, shown, parts)
		if i == 0 || shown < best {
			best = shown
		}
	}
	waitJS(t, ctx, "five updates", "trellis.updates >= 5", 30*time.Second)
	update, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`Math.max(...trellis.updateMs.slice(1))`))
	inspectMs, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`Math.max(...trellis.inspectMs.slice(1))`))
	fps, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`new Promise(done => {
		const cy = trellis.graph.cy; let frames = 0; const t0 = performance.now();
		const step = () => { frames++; cy.panBy({x: 3, y: 1});
			if (performance.now() - t0 < 2000) requestAnimationFrame(step); else done(frames / ((performance.now() - t0) / 1000)); };
		requestAnimationFrame(step); })`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "web-200-nodes.png")
	fmt.Printf("web figures, %d nodes and %d links: page shown in %.0f ms (best of 3, target < 1000 ms); "+
		"inspect as the page polls it at most %.0f ms, the graph's update at most %.0f ms a second; %.0f frames/s while panning\n",
		n, n+n/10, best, inspectMs, update, fps)
	if best > 1000 {
		t.Errorf("the page showed %d nodes in %.0f ms, want < 1000 ms", n, best)
	}
	s.must(204, "DELETE", "/networks/"+name, "", "")
	s.stop()
	e.assertClean()
}
