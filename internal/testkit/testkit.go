// Package testkit is what every trellis test uses to say what it needs from the machine (root,
// a tool, a kernel feature, an opt-in variable), to check that it left the host as it found it,
// and to get a temporary state directory.
//
// A test that cannot run here calls one of the Require functions (or Skip). On a developer
// machine the test is skipped with what is missing and how to get it. In CI ($TRELLIS_CI=1,
// which scripts/test.sh sets) the test fails instead, unless its name is in
// test/skips-allowed-in-ci.txt with the reason CI cannot run it: CI cannot be green with whole
// areas unrun. docs/testing.md shows how to use it.
package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// CIEnv marks a CI run: set to anything but "" or "0", a skip not on the allow-list fails.
const CIEnv = "TRELLIS_CI"

// AllowListPath is the allow-list of skips in CI, relative to the module's root.
const AllowListPath = "test/skips-allowed-in-ci.txt"

// InCI tells whether this is a CI run ($TRELLIS_CI).
func InCI() bool {
	v := os.Getenv(CIEnv)
	return v != "" && v != "0"
}

// allowListFile is where the allow-list is read from; "" finds it above the working directory
// (tests run in their package's directory). The kit's own tests point it elsewhere.
var allowListFile = ""

var allowed struct {
	once sync.Once
	list map[string]string
	err  error
}

// allowList reads the allow-list once per test binary.
func allowList() (map[string]string, error) {
	allowed.once.Do(func() {
		path := allowListFile
		if path == "" {
			root, err := ModuleRoot()
			if err != nil {
				allowed.err = err
				return
			}
			path = filepath.Join(root, AllowListPath)
		}
		allowed.list, allowed.err = ReadAllowList(path)
	})
	return allowed.list, allowed.err
}

// ModuleRoot is the nearest directory above the working directory holding go.mod (the
// package directory under go test: its module's root).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Skip skips the test, saying why: what is missing and how to get it. In CI it fails the test
// instead, unless the test is on the allow-list.
func Skip(t testing.TB, why string) {
	t.Helper()
	if !InCI() {
		t.Skip(why)
		return
	}
	list, err := allowList()
	if err != nil {
		t.Fatalf("%s; and the allow-list of skips in CI cannot be read: %v", why, err)
		return
	}
	if reason, ok := list[t.Name()]; ok {
		t.Skipf("%s (allowed in CI: %s)", why, reason)
		return
	}
	t.Fatalf("%s\nthis is CI (%s=%s) and %s is not in %s: install what is missing, or add the test there with the reason CI cannot run it",
		why, CIEnv, os.Getenv(CIEnv), t.Name(), AllowListPath)
}

// Skipf is Skip with a format.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	Skip(t, fmt.Sprintf(format, args...))
}
