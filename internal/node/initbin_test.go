package node

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The embedded init program must be what its source builds to: a change to package nodeinit
// needs `go generate ./internal/node`.
func TestInitProgramIsBuilt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "init")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, "./nodeinit/trellis-node-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the init program: %v\n%s", err, msg)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, initProgram) {
		t.Fatalf("nodeinit.bin (%d bytes) is not what package nodeinit builds to (%d bytes): run `go generate ./internal/node`", len(initProgram), len(built))
	}
}

// The init program is started from a sealed in-memory file that no one can change.
func TestInitFileIsSealed(t *testing.T) {
	f, err := initFile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("the init program's file took a write")
	}
	if err := f.Truncate(0); err == nil {
		t.Fatal("the init program's file was truncated")
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(len(initProgram)) || fi.Mode().Perm() != 0o555 {
		t.Fatalf("size %d mode %v, want %d and 0555", fi.Size(), fi.Mode().Perm(), len(initProgram))
	}
}
