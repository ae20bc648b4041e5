package main

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// ErrNoTrellis is returned when the bench finds no trellis binary to run.
var ErrNoTrellis = errors.New("no trellis binary")

// findTrellis returns the absolute path of the trellis binary the bench runs: flag when it is
// given, else trellis beside this program (bin/trellis beside bin/trellis-bench), else trellis
// on PATH. It notes on log a binary built from another revision than this program.
func findTrellis(flag string, log io.Writer) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	path, err := lookTrellis(flag, filepath.Dir(self))
	if err != nil {
		return "", err
	}
	if a, b := revision(self), revision(path); a != b {
		fmt.Fprintf(log, "note: %s was built from %s, trellis-bench from %s: build both from the same tree (scripts/setup.sh)\n", path, b, a)
	}
	return path, nil
}

// lookTrellis finds the trellis binary: flag, else trellis in dir, else on PATH.
func lookTrellis(flag, dir string) (string, error) {
	if flag != "" {
		if err := isExecutable(flag); err != nil {
			return "", fmt.Errorf("--trellis: %w", err)
		}
		return filepath.Abs(flag)
	}
	if beside := filepath.Join(dir, "trellis"); isExecutable(beside) == nil {
		return beside, nil
	}
	if p, err := exec.LookPath("trellis"); err == nil {
		return filepath.Abs(p)
	}
	return "", fmt.Errorf("%w beside trellis-bench (%s) nor on PATH: build it (CGO_ENABLED=0 go build -o bin/trellis ./cmd/trellis) or name it with --trellis", ErrNoTrellis, dir)
}

// isExecutable says why path is not an executable file, or nil.
func isExecutable(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// revision is the version control revision a Go binary was built from ("+" if its tree had
// changes), or "an unknown revision".
func revision(path string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "an unknown revision"
	}
	rev, modified := "", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = "+"
		}
	}
	if rev == "" {
		return "an unknown revision"
	}
	return rev[:min(len(rev), 12)] + modified
}
