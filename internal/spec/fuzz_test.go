package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzParse feeds the parser and validator arbitrary files. Parse must not panic; it must give
// the same answer twice; a file it rejects gets well-formed Errors sorted by line; a file it
// accepts satisfies CheckInvariants, which is what the plan and substrate rely on.
func FuzzParse(f *testing.F) {
	examples, err := filepath.Glob("../../examples/*/*.yaml")
	if err != nil || len(examples) == 0 {
		f.Fatalf("no examples to seed with: %v", err)
	}
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, tc := range parseErrorCases {
		f.Add([]byte(tc.doc))
	}
	for _, tc := range multiErrorCases {
		f.Add([]byte(tc.doc))
	}
	for _, doc := range validDocs {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parse("fuzz.yaml", data, fakeSource)
		_, err2 := parse("fuzz.yaml", data, fakeSource)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("two parses of one file differ:\n%v\n----\n%v", err, err2)
		}
		if err != nil {
			checkWellFormed(t, n, err)
			return
		}
		if err := CheckInvariants(n); err != nil {
			t.Fatalf("Parse accepted a network that breaks the invariants:\n%v\nfile:\n%s", err, data)
		}
	})
}

// fakeSource stands for the file system in the fuzz test: every `source:` holds one line.
func fakeSource(string) ([]byte, error) { return []byte("from source\n"), nil }

func checkWellFormed(t *testing.T, n *Network, err error) {
	t.Helper()
	es, ok := err.(Errors)
	if n != nil || !ok || len(es) == 0 {
		t.Fatalf("Parse returned %v and %T %v; want no network and a non-empty spec.Errors", n, err, err)
	}
	if !slices.IsSortedFunc(es, func(a, b *Error) int { return a.Line - b.Line }) {
		t.Fatalf("errors not sorted by line:\n%v", err)
	}
	for _, e := range es {
		if e.File != "fuzz.yaml" || e.Field == "" || e.Msg == "" || e.Line < 0 || strings.ContainsAny(e.Error(), "\r\n") {
			t.Fatalf("malformed error %#v", e)
		}
	}
}
