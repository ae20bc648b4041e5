package vmsock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPathFits(t *testing.T) {
	long := strings.Repeat("n", 63) // the longest node name
	for _, c := range []struct {
		name      string
		keepsName bool
	}{
		{"r1", true},
		{"r1@fe0", true},
		{long, true},
		{long + "@fe63", true}, // the longest engine VM's name, with an 8-character state id
		{long + "@fe63" + "x", false},
	} {
		p := Path("0123abcd", "a1b2c3", c.name, Mirror)
		if len(p) > maxPath {
			t.Errorf("%s: path %q is %d bytes, more than sun_path holds", c.name, p, len(p))
		}
		if got := filepath.Base(filepath.Dir(p)) == c.name; got != c.keepsName {
			t.Errorf("%s: directory %q, want the name itself: %v", c.name, filepath.Dir(p), c.keepsName)
		}
	}
	if Dir("s", "n", strings.Repeat("a", 90)) == Dir("s", "n", strings.Repeat("b", 90)) {
		t.Error("two long names share a directory")
	}
}

func TestSweep(t *testing.T) {
	RunDir = t.TempDir()
	for _, name := range []string{"a", "b", strings.Repeat("c", 90)} {
		if err := os.MkdirAll(Dir("s", "n", name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := Sweep("s", "n", []string{"a", strings.Repeat("c", 90)}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"a": true, "b": false, strings.Repeat("c", 90): true} {
		if _, err := os.Stat(Dir("s", "n", name)); (err == nil) != want {
			t.Errorf("after Sweep, %s's directory there: %v, want %v", name, err == nil, want)
		}
	}
	if err := Remove("s", "n", "a"); err != nil {
		t.Fatal(err)
	}
	if err := Sweep("s", "n", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(NetworkDir("s", "n")); !os.IsNotExist(err) {
		t.Errorf("the network's directory is left after its last VM: %v", err)
	}
	if err := Sweep("s", "n", nil); err != nil {
		t.Errorf("Sweep of a network without a directory: %v", err)
	}
}
