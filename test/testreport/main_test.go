package main

import (
	"strings"
	"testing"
)

// The events of a package with a passing, a failing (with a failing subtest) and a skipped
// test, as `go test -json` writes them, and a line that is not JSON.
const sample = `{"Action":"start","Package":"github.com/trellisnet/trellis/internal/x"}
{"Action":"run","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestOK"}
{"Action":"output","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestOK","Output":"    x_test.go:9: quiet log\n"}
{"Action":"pass","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestOK","Elapsed":2.5}
{"Action":"run","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestBad"}
{"Action":"output","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestBad/case","Output":"    x_test.go:20: want 1, got 2\n"}
{"Action":"output","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestBad/case","Output":"    --- FAIL: TestBad/case (0.10s)\n"}
{"Action":"fail","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestBad/case","Elapsed":0.1}
{"Action":"output","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestBad","Output":"--- FAIL: TestBad (7.00s)\n"}
{"Action":"fail","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestBad","Elapsed":7}
{"Action":"output","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"github.com/trellisnet/trellis/internal/x","Test":"TestSkip","Elapsed":0}
{"Action":"output","Package":"github.com/trellisnet/trellis/internal/x","Output":"FAIL\n"}
{"Action":"output","Package":"github.com/trellisnet/trellis/internal/x","Output":"FAIL\tgithub.com/trellisnet/trellis/internal/x\t9.6s\n"}
{"Action":"fail","Package":"github.com/trellisnet/trellis/internal/x","Elapsed":9.6}
{"ImportPath":"github.com/trellisnet/trellis/internal/y","Action":"build-output","Output":"internal/y/y.go:3:1: syntax error\n"}
go: something printed as text
{"Action":"run","Package":"github.com/trellisnet/trellis/internal/z","Test":"TestHang"}
{"Action":"output","Package":"github.com/trellisnet/trellis/internal/z","Test":"TestHang","Output":"panic: test timed out after 1s\n"}
`

func TestReport(t *testing.T) {
	var b strings.Builder
	r := &report{out: &b, buffered: map[string][]string{}}
	if err := r.read(strings.NewReader(sample)); err != nil {
		t.Fatal(err)
	}
	r.summary(2)
	got := b.String()
	for _, want := range []string{
		"    x_test.go:20: want 1, got 2\n    --- FAIL: TestBad/case (0.10s)\n--- FAIL: TestBad (7.00s)\n",
		"FAIL\tgithub.com/trellisnet/trellis/internal/x\t9.6s\n",
		"internal/y/y.go:3:1: syntax error\n",
		"go: something printed as text\n",
		"(no result for github.com/trellisnet/trellis/internal/z TestHang; its output:)\npanic: test timed out after 1s\n",
		"slowest tests (of 3, 10 s in all):\n       7.0 s  internal/x.TestBad\n       2.5 s  internal/x.TestOK\n",
		"slowest packages (of 1, 10 s in all):\n       9.6 s  github.com/trellisnet/trellis/internal/x\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; it is:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"quiet log", "=== RUN", "SKIP", "\nPASS\n"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("output has %q, which go test without -v does not print; it is:\n%s", unwanted, got)
		}
	}
}

// A line longer than a Scanner's buffer, and a last line without its newline, pass through.
func TestReportLongLines(t *testing.T) {
	long := strings.Repeat("x", 1<<21)
	var b strings.Builder
	r := &report{out: &b, buffered: map[string][]string{}}
	if err := r.read(strings.NewReader(long + "\nlast")); err != nil {
		t.Fatal(err)
	}
	if b.String() != long+"\nlast\n" {
		t.Errorf("got %d bytes, want the long line and the last one", b.Len())
	}
}
