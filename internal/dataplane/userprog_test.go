package dataplane

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileUser: the same source compiles to the same object from any working directory
// (the object's digest says whether a running program is the file's), and clang's errors
// name the user's file and line. Needs clang, as nodes with programs do.
func TestCompileUser(t *testing.T) {
	if _, err := exec.LookPath("clang"); err != nil {
		t.Fatalf("clang is not installed (%v): scripts/setup.sh installs it (Debian: apt-get install clang)", err)
	}
	path, err := filepath.Abs("../../examples/ebpf/l3/l3.c")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := CompileUser(context.Background(), path, src)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	b, err := CompileUser(context.Background(), path, src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the same source gave two objects from two working directories")
	}
	bad := bytes.Replace(src, []byte("count(FORWARDED);"), []byte("count(FORWARDED)"), 1)
	_, err = CompileUser(context.Background(), path, bad)
	if !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), path+":87:") {
		t.Errorf("error = %v, want ErrCompile naming %s and the line", err, path)
	}
}
