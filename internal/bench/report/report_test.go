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
// byte for byte as `trellis bench` writes it.
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
// page's layout regenerates the page (`trellis bench report docs/benchmarks/bench.json
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
	for _, h := range []string{"## Forwarding", "## CPU cost", "## Where the time goes", "## Frame sizes", "## Scaling", "## Isolation", "## Deploy"} {
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
