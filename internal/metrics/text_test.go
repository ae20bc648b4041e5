package metrics

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestTextFormat writes samples, with label values that need escaping, and parses them back
// with Prometheus's own parser.
func TestTextFormat(t *testing.T) {
	s := samples{}
	s.add(famRxFrames, 18446744073709551615, "net", "r1", `a"b\c`, "eth1", "m\n1")
	s.add(famRxFrames, 3, "net", "r2", "l", "eth2", "m1")
	s.add(famLinkUp, 1, "net", "l", "m1")
	s.addFloat(famScrape, 0.125)
	var out bytes.Buffer
	s.writeTo(&out)
	text := out.String()
	if want := `trellis_link_up{link="l",machine="m1",network="net"} 1` + "\n"; !strings.Contains(text, want) {
		t.Errorf("labels not in name order; want %q in\n%s", want, text)
	}
	if strings.Index(text, "trellis_link_up") > strings.Index(text, "trellis_port_rx_frames_total") {
		t.Errorf("families not in their order:\n%s", text)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	cases := []struct {
		family string
		n      int
		labels map[string]string // of the first sample
		value  float64
	}{
		{"trellis_port_rx_frames_total", 2, map[string]string{"link": `a"b\c`, "machine": "m\n1", "node": "r1"}, 18446744073709551615},
		{"trellis_link_up", 1, map[string]string{"link": "l"}, 1},
		{"trellis_scrape_duration_seconds", 1, map[string]string{}, 0.125},
	}
	for _, c := range cases {
		mf := mfs[c.family]
		if mf == nil || len(mf.Metric) != c.n || mf.GetHelp() == "" {
			t.Fatalf("%s: %v", c.family, mf)
		}
		m := mf.Metric[0]
		got := map[string]string{}
		for _, lp := range m.Label {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range c.labels {
			if got[k] != v {
				t.Errorf("%s: label %s = %q, want %q", c.family, k, got[k], v)
			}
		}
		v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
		if v != c.value {
			t.Errorf("%s: value %v, want %v", c.family, v, c.value)
		}
	}
	if typ := mfs["trellis_port_rx_frames_total"].GetType().String(); typ != "COUNTER" {
		t.Errorf("type %s", typ)
	}
}

// TestNames checks every exported name is a valid, unique Prometheus metric name, and that
// counters end in _total and no gauge does (Prometheus naming).
func TestNames(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range Names() {
		if !model.LegacyValidation.IsValidMetricName(n) || !strings.HasPrefix(n, "trellis_") || seen[n] {
			t.Errorf("bad or repeated name %q", n)
		}
		seen[n] = true
	}
	for _, f := range families {
		if (f.typ == counter) != strings.HasSuffix(f.name, "_total") {
			t.Errorf("%s is a %s", f.name, f.typ)
		}
	}
}
