package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/bench"
	"github.com/trellisnet/trellis/internal/bench/setup"
)

// `trellis bench` with an unknown part or setup fails before it creates anything (not even the
// state directory or the output directory), naming the known ones.
func TestBenchUnknownNames(t *testing.T) {
	for _, c := range []struct {
		args    []string
		wantErr error
		wantIn  string
	}{
		{[]string{"--parts", "nosuch"}, bench.ErrUnknownPart, "known: " + strings.Join(bench.AllParts, ", ")},
		{[]string{"--parts", "forward,nosuch"}, bench.ErrUnknownPart, `"nosuch"`},
		{[]string{"--setups", "native,bridges"}, setup.ErrUnknownSetup, "known: " + strings.Join(setup.Names(), ", ")},
	} {
		dir := t.TempDir()
		state, out := filepath.Join(dir, "state"), filepath.Join(dir, "out")
		root := NewRoot()
		var stdout bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&stdout)
		root.SetArgs(append([]string{"--state-dir", state, "bench", "--out", out}, c.args...))
		err := root.Execute()
		if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.wantIn) {
			t.Errorf("trellis bench %v: %v, want %v naming %s", c.args, err, c.wantErr, c.wantIn)
		}
		for _, d := range []string{state, out} {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("trellis bench %v made %s", c.args, d)
			}
		}
	}
}
