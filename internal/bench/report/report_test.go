package report

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/bench/result"
)

// The committed figures of a full run, and the page made from them.
const (
	docsJSON = "../../../docs/benchmarks/bench.json"
	docsPage = "../../../docs/benchmarks.md"
)

func docsReport(t *testing.T) (*result.Report, []byte) {
	t.Helper()
	data, err := os.ReadFile(docsJSON)
	if err != nil {
		t.Fatal(err)
	}
	var rep result.Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("%s: %v", docsJSON, err)
	}
	return &rep, data
}

// bench.json keeps every field: the committed file reads into result.Report and writes back
// byte for byte as trellis-bench writes it.
func TestJSONRoundTrip(t *testing.T) {
	rep, data := docsReport(t)
	out, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(out, '\n'), data) {
		t.Errorf("%s does not read and write back unchanged", docsJSON)
	}
}

// docs/benchmarks.md is what the renderer makes of docs/benchmarks/bench.json: a change to the
// page's layout regenerates the page (`trellis-bench report docs/benchmarks/bench.json
// --markdown docs/benchmarks.md`) in the same commit.
func TestPageMatchesFigures(t *testing.T) {
	rep, _ := docsReport(t)
	want, err := os.ReadFile(docsPage)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	markdown(&b, rep, "benchmarks")
	if b.String() != string(want) {
		got, wantLines := strings.Split(b.String(), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(got), len(wantLines)) {
			if got[i] != wantLines[i] {
				t.Fatalf("%s differs from its rendering at line %d:\n got: %s\nwant: %s", docsPage, i+1, got[i], wantLines[i])
			}
		}
		t.Fatalf("%s has %d lines, its rendering %d", docsPage, len(wantLines), len(got))
	}
}

// Every section writes nothing for a report without its figures, and the plots listed are
// those the report has figures for.
func TestEmptyReport(t *testing.T) {
	rep := &result.Report{}
	var b strings.Builder
	markdown(&b, rep, "p")
	for _, h := range []string{"## Forwarding", "## CPU cost", "## Where the time goes", "## Frame sizes", "## Scaling", "## Isolation", "## Deploy", "## Live changes", "## Link impairments"} {
		if strings.Contains(b.String(), h) {
			t.Errorf("an empty report has a section %q", h)
		}
	}
	if !strings.Contains(b.String(), "## Method") {
		t.Error("the method is missing")
	}
	if p := PlotsOf(rep); len(p) != 0 {
		t.Errorf("plots of an empty report: %v", p)
	}
	full, _ := docsReport(t)
	if p := PlotsOf(full); len(p) != 5 {
		t.Errorf("plots of a full run: %v", p)
	}
}

// The live changes and impairments sections show every step and row, with the load average,
// the configured and delivered figures and why delay was not measured.
func TestLiveSections(t *testing.T) {
	st := func(v ...float64) result.Stat { return result.StatOf(v) }
	burst := st(2.1, 2.3)
	rep := &result.Report{
		Apply: &result.ApplyResult{Nodes: 1000, Load1: 3.5, BuildSeconds: 9.5, Steps: []result.ApplyStep{
			{Change: "unchanged file", Seconds: st(0.12, 0.1, 0.2)},
			{Change: "one link's rate", Seconds: st(0.25), Applied: []string{"~ link a--b: rate none -> 100mbit"}},
		}},
		Impair: &result.ImpairResult{Frames: 20000, Load1: 4.25, Delay: "not measured: the kernel lacks netem.", Rows: []*result.ImpairRow{
			{Config: "none", GotLoss: st(0, 0)},
			{Config: "loss: 10% 50%", Loss: 10, LossCorrelation: 50, GotLoss: st(9.5, 10.5), WantBurst: 2.2222, GotBurst: &burst},
		}},
	}
	var b strings.Builder
	markdown(&b, rep, "p")
	page := b.String()
	for _, want := range []string{
		"## Live changes", "chain of 1000 nodes", "in\n9.50 s", "Load average 3.50",
		"| unchanged file | 0.120 (0.100–0.200) | nothing |",
		"| one link's rate | 0.250 | `~ link a--b: rate none -> 100mbit` |",
		"## Link impairments", "20000 numbered", "Load average 4.25",
		"| none | 0.00 (0.00–0.00) | – | – | – | – |",
		"| `loss: 10% 50%` | 10.00 (9.50–10.50) | – | – | 2.22 | 2.20 (2.10–2.30) |",
		"Delay: not measured: the kernel lacks netem.\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Index(page, "## Live changes") > strings.Index(page, "## Link impairments") {
		t.Error("sections out of order")
	}
	var sum strings.Builder
	Summary(&sum, rep)
	for _, want := range []string{"one link's rate:", "0.250s", "loss: 10% 50%:", "lost 10.00%"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, sum.String())
		}
	}
}

// The delay section shows this machine's run, then each guest's under a heading naming its
// kernel, with how it ran, its rows and its ceiling.
func TestDelayGuests(t *testing.T) {
	row := func(rate string, median float64) *result.DelayRow {
		return &result.DelayRow{Rate: rate, Config: "delay: 10ms", Delay: 10, Median: median, P99: median + 1}
	}
	rep := &result.Report{
		Delay: &result.DelayResult{Way: "delay line", Kernel: "6.18.1", Frames: 1000, Load1: 2, Rows: []*result.DelayRow{row("1mbit", 10.05)}},
		DelayGuests: []*result.DelayResult{{Way: "netem", Kernel: "6.1.0-56-amd64", Frames: 500, Load1: 2.5, Where: "Under TCG.",
			Rows: []*result.DelayRow{row("100mbit", 11.25)}, Ceiling: &result.DelayCeiling{FrameSize: 1514, Frames: 100, PlainKpps: 5.5, DelayKpps: 3.3}}},
	}
	var b strings.Builder
	markdown(&b, rep, "p")
	page := b.String()
	for _, want := range []string{
		"Delayed by\ntrellis's delay line (no netem in this kernel), kernel 6.18.1;",
		"| 1mbit | `delay: 10ms` | 10.050 | 11.050 |",
		"### In Linux 6.1.0-56-amd64\n\n500 frames a row, delayed by netem; load average 2.50 when the part began. Under TCG.\n\n",
		"| 100mbit | `delay: 10ms` | 11.250 | 12.250 |",
		"5.5 kpps (0 Mbit/s) arrived without a delay, 3.3 kpps",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Index(page, "| 1mbit |") > strings.Index(page, "### In Linux") {
		t.Error("the guest's run comes before this machine's")
	}
}
