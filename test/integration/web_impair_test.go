//go:build integration

package integration

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/vishvananda/netlink"
)

// TestWebImpairments edits a link from the page in a real browser: the link's panel fits its
// width (no button or field cut off at the right edge), loss typed into its impairments form
// is what the port's impairment program holds in the kernel, and an endpoint's own button
// takes that endpoint's carrier away. Screenshots go to the CI log folder.
func TestWebImpairments(t *testing.T) {
	ctx := browser(t, 1400, 900)
	e := start(t)
	name := "webimp" + nonce()[:4]
	registerNetwork(name)
	s, page := startServeTCP(t, e.state)
	// The link names its connector: the test reads what the page set from its ports' programs.
	s.must(201, "POST", "/networks", "application/yaml", fmt.Sprintf(apiTopo, name)+"    connector: shortbridge\n")
	const link = "a:eth1--b:eth1"
	ports := map[string]string{}
	for _, ep := range s.inspect(name).link(t, link).Endpoints {
		ports[ep.Node] = ep.Port
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(page+"#/n/"+name)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the graph", "window.trellis && trellis.shown !== null", 20*time.Second)
	clickElement(t, ctx, "link:"+link)
	waitJS(t, ctx, "the impairments form", `!!document.querySelector("form.impair input[name=loss]")`, 10*time.Second)
	cut, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const aside = document.querySelector("aside"), right = aside.getBoundingClientRect().right;
		const out = [...aside.querySelectorAll("button, input, select, a.button")]
			.filter(el => el.offsetParent !== null && el.getBoundingClientRect().right > right - 1)
			.map(el => el.textContent || el.name);
		if (aside.scrollWidth > aside.clientWidth) out.push("the panel scrolls sideways: " + aside.scrollWidth + " > " + aside.clientWidth);
		return out; })()`))
	if err != nil || len(cut) != 0 {
		t.Errorf("the link's panel cuts off at its right edge: %q (%v)", cut, err)
	}
	screenshot(t, ctx, "web-link-panel.png")

	for _, f := range []struct{ field, value string }{{"loss", "20"}, {"endpoint", "a:eth1"}} {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("form.impair input[name="+f.field+"]")), typeText(f.value)); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form.impair button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the impairment set", `document.querySelector(".panel-link .msg").textContent === "setting impairments: done"`, 10*time.Second)
	for node, want := range map[string]float64{"a": 20, "b": 0} {
		if got := portImpairment(t, ports[node]); math.Abs(got.Loss-want) > 1e-6 || got.Duplicate != 0 || got.Corrupt != 0 {
			t.Errorf("the kernel's impairment of %s's port %s after the page set loss 20%% on a:eth1: %+v, want loss %v%%", node, ports[node], got, want)
		}
	}
	waitJS(t, ctx, "the impairment shown", `document.querySelector(".panel-link").textContent.includes("a:eth1 sends with loss 20%")`, 10*time.Second)
	screenshot(t, ctx, "web-impairments.png")

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[data-endpoint="a:eth1"]`))); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); carrierUp(t, ports["a"]) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if carrierUp(t, ports["a"]) || !carrierUp(t, ports["b"]) {
		t.Errorf("after a:eth1's take down: a's port up %v, b's %v; want a's down only", carrierUp(t, ports["a"]), carrierUp(t, ports["b"]))
	}
	// The carrier goes before the change ends; until the page says done, the network is still
	// being changed and a DELETE is rightly refused (409).
	waitJS(t, ctx, "the take down done", `document.querySelector(".panel-link .msg").textContent === "a:eth1 down: done"`, 10*time.Second)
	s.must(204, "DELETE", "/networks/"+name, "", "")
	s.stop()
	e.assertClean()
}

// portImpairment reads what the impairment program of a port holds in the kernel.
func portImpairment(t *testing.T, port string) dataplane.Impairment {
	t.Helper()
	var im dataplane.Impairment
	err := inPortsOf(t, port, func() error {
		l, err := netlink.LinkByName(port)
		if err != nil {
			return err
		}
		im, err = dataplane.ReadImpairment(l.Attrs().Index)
		return err
	})
	if err != nil {
		t.Fatalf("port %s: %v", port, err)
	}
	return im
}
