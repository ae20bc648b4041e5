package noderuntime

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The embedded init program must be what its source builds to: a change to package nodeinit
// needs `go generate ./internal/noderuntime`.
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
		t.Fatalf("nodeinit.bin (%d bytes) is not what package nodeinit builds to (%d bytes): run `go generate ./internal/noderuntime`", len(initProgram), len(built))
	}
}

// The embedded C programs must be what their sources build to: a change to enter/enter.c or
// pid1/pid1.c needs `go generate ./internal/noderuntime` (gcc and libc6-dev's static libc.a).
func TestCProgramsAreBuilt(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("gcc builds the enter and pid1 programs: install gcc and libc6-dev (apt-get install gcc libc6-dev): %v", err)
	}
	for _, c := range []struct {
		bin, src string
		embedded []byte
	}{
		{"enter.bin", "./enter/enter.c", enterProgram},
		{"pid1.bin", "./pid1/pid1.c", pid1Program},
	} {
		t.Run(c.bin, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), c.bin)
			cmd := exec.Command(gcc, "-static", "-O2", "-s", "-Wl,--build-id=none", "-o", out, c.src)
			if msg, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("building %s (a static build needs libc6-dev's libc.a): %v\n%s", c.src, err, msg)
			}
			built, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(built, c.embedded) {
				version, _ := exec.Command(gcc, "--version").Output()
				first, _, _ := bytes.Cut(version, []byte("\n"))
				t.Fatalf("%s (%d bytes) is not what %s builds to with %s (%d bytes): run `go generate ./internal/noderuntime`", c.bin, len(c.embedded), c.src, first, len(built))
			}
		})
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
