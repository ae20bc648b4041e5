// Command testreport reads `go test -json` on its standard input and prints what `go test`
// prints without -v (each package's result line, a failing test's output, build errors), then
// the slowest tests and packages of the run, so that a CI log shows where its time went
// (scripts/test.sh). Lines that are not JSON events pass through unchanged.
//
// Usage: go test -json ./... | testreport [-slowest N]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// timing is how long one test or package took.
type timing struct {
	name    string
	seconds float64
}

// report holds what the summary needs between events.
type report struct {
	out      io.Writer
	buffered map[string][]string // a running test's output, by package and test
	tests    []timing            // top-level tests that ended
	packages []timing
}

func main() {
	slowest := flag.Int("slowest", 20, "how many of the slowest tests (and packages) to list at the end")
	flag.Parse()
	r := &report{out: os.Stdout, buffered: map[string][]string{}}
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	r.summary(*slowest)
}

// read prints the events of in as go test would without -v.
func (r *report) read(in io.Reader) error {
	br := bufio.NewReader(in) // no limit on a line's length, unlike a Scanner
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			r.line(strings.TrimSuffix(line, "\n"))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	r.unfinished()
	return nil
}

// unfinished prints what each test with no result (its binary crashed or timed out) printed.
func (r *report) unfinished() {
	keys := make([]string, 0, len(r.buffered))
	for k := range r.buffered {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(r.out, "(no result for %s; its output:)\n%s", k, strings.Join(r.buffered[k], ""))
	}
}

// line handles one line of input: an event, or text printed as it is.
func (r *report) line(line string) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
		fmt.Fprintln(r.out, line)
		return
	}
	r.event(e)
}

// event handles one event.
func (r *report) event(e event) {
	key := e.Package + " " + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Test == "" && e.Action == "output":
		if t := strings.TrimSpace(e.Output); t != "PASS" && !strings.HasPrefix(t, "=== ") {
			fmt.Fprint(r.out, e.Output)
		}
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail"):
		r.packages = append(r.packages, timing{e.Package, e.Elapsed})
	case e.Action == "output":
		if !strings.HasPrefix(strings.TrimSpace(e.Output), "=== ") {
			r.buffered[key] = append(r.buffered[key], e.Output)
		}
	case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
		if e.Action == "fail" {
			for _, l := range r.buffered[key] {
				fmt.Fprint(r.out, l)
			}
		}
		delete(r.buffered, key)
		if !strings.Contains(e.Test, "/") {
			r.tests = append(r.tests, timing{short(e.Package) + "." + e.Test, e.Elapsed})
		}
	}
}

// summary lists the n slowest tests and packages.
func (r *report) summary(n int) {
	list := func(title string, ts []timing) {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].seconds > ts[j].seconds })
		var total float64
		for _, t := range ts {
			total += t.seconds
		}
		fmt.Fprintf(r.out, "%s (of %d, %.0f s in all):\n", title, len(ts), total)
		for _, t := range ts[:min(n, len(ts))] {
			fmt.Fprintf(r.out, "  %8.1f s  %s\n", t.seconds, t.name)
		}
	}
	if n <= 0 || len(r.tests) == 0 {
		return
	}
	list("slowest tests", r.tests)
	list("slowest packages", r.packages)
}

// module is the path that test names drop from their package's.
const module = "github.com/trellisnet/trellis/"

// short is a package's path after the module's.
func short(pkg string) string {
	return strings.TrimPrefix(pkg, module)
}
