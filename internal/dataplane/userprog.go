package dataplane

// A node's own forwarding program (spec.Dataplane, docs/ebpf-nodes.md): compiled from C with
// clang against include/trellis.h, checked by the kernel's verifier, and attached to the tc
// egress of each of the node's ports in the substrate (where the engines' classifier goes on
// a node with engines): every frame on its way into the node passes through it first. Nothing
// is pinned: the kernel holds the program and its maps as long as a port's filter refers to
// them, so they go with the ports (trellis down, or the node's end) even after a kill -9, and
// trellis finds them again through the ports' filters.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
)

//go:embed include/trellis.h
var userInclude embed.FS

// Errors of user programs.
var (
	ErrCompile   = errors.New("dataplane: program does not compile")
	ErrNoClang   = errors.New("dataplane: clang not found")
	ErrProgram   = errors.New("dataplane: program")
	ErrVerifier  = errors.New("dataplane: the kernel's verifier rejected the program")
	ErrNoTable   = errors.New("dataplane: no such table")
	ErrEntrySize = errors.New("dataplane: wrong size")
	ErrReadOnly  = errors.New("dataplane: refused")
	ErrNoEntry   = errors.New("no entry")
	ErrBadHex    = errors.New("not hex bytes")
	ErrBadOp     = errors.New("dataplane: no such table operation")
)

// Names of the maps trellis.h declares and trellis fills.
const (
	userPortsMap  = "trellis_ports"
	userPortOfMap = "trellis_port_of"
)

// maxMapName is the longest map name the kernel keeps (BPF_OBJ_NAME_LEN, less its NUL): the
// name `trellis table` finds a map by.
const maxMapName = 15

// CompileUser compiles a node's C program (path: where it was read from, for clang's messages
// and the program's own #include "..." files) into an eBPF object.
func CompileUser(ctx context.Context, path string, src []byte) ([]byte, error) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		return nil, fmt.Errorf("%w: compiling %s needs it (Debian: apt-get install clang; scripts/setup.sh installs it)", ErrNoClang, path)
	}
	dir, err := os.MkdirTemp("", "trellis-prog-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	h, _ := userInclude.ReadFile("include/trellis.h")
	if err := os.WriteFile(filepath.Join(dir, "trellis.h"), h, 0o644); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "prog.o")
	cmd := exec.CommandContext(ctx, clang, "-O2", "-g", "-target", "bpf", "-Wall", "-Wno-unused-function", "-Werror=implicit-function-declaration",
		"-I", dir, "-iquote", filepath.Dir(path),
		// The same source gives the same object (its Digest) whatever the directories.
		"-fdebug-prefix-map="+dir+"=/trellis", "-fdebug-compilation-dir=.",
		"-idirafter", "/usr/include/x86_64-linux-gnu", "-idirafter", "/usr/include/aarch64-linux-gnu",
		"-c", "-x", "c", "-", "-o", out)
	// #line makes clang name the user's file and lines in its messages, not standard input.
	cmd.Stdin = withLine(fmt.Sprintf("#line 1 %q\n", path), src)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("%w: %s:\n%s", ErrCompile, path, msg)
	}
	return os.ReadFile(out)
}

func withLine(head string, src []byte) *bytes.Reader {
	return bytes.NewReader(append([]byte(head), src...))
}

// UserProgram is a node's program loaded into the kernel, with its maps. Close releases this
// process's hold on them: attached, they keep running.
type UserProgram struct {
	Prog *ebpf.Program
	Name string // the program's function
	// Digest identifies the object the program was loaded from (its instructions, its maps'
	// layouts, its constants); the ports' filters carry it in their names.
	Digest string
	maps   map[string]*ebpf.Map
}

// Close releases the program and maps held by the process.
func (u *UserProgram) Close() {
	u.Prog.Close()
	for _, m := range u.maps {
		m.Close()
	}
}

// LoadUser loads a compiled program (path: for messages) into the kernel, which verifies it.
// The object must have one tc program; its maps are never pinned, whatever it asks. With
// prev (the program running now, or nil), the new program shares each of prev's maps that has
// the name and layout (type, key and value sizes, entries, flags) of one of its own: their
// contents stay as they are across a reload; the others start empty.
func LoadUser(path string, obj []byte, prev *UserProgram) (*UserProgram, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("dataplane: lifting memlock rlimit: %w", err)
	}
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(obj))
	if err != nil {
		return nil, fmt.Errorf("%w %s: not an eBPF object: %w", ErrProgram, path, err)
	}
	var name string
	for n, ps := range spec.Programs {
		if ps.Type != ebpf.SchedCLS {
			return nil, fmt.Errorf("%w %s: function %s is in section %q, not a tc program: mark it TRELLIS_PROGRAM (SEC(\"tc\"))", ErrProgram, path, n, ps.SectionName)
		}
		if name != "" {
			return nil, fmt.Errorf("%w %s: two programs, %s and %s: a node runs one (make the others static inline helpers)", ErrProgram, path, name, n)
		}
		name = n
	}
	if name == "" {
		return nil, fmt.Errorf("%w %s: no program: mark the function that handles a frame TRELLIS_PROGRAM", ErrProgram, path)
	}
	for n, ms := range spec.Maps {
		if len(n) > maxMapName && !strings.HasPrefix(n, ".") {
			return nil, fmt.Errorf("%w %s: map name %s is longer than the %d characters the kernel keeps: shorten it", ErrProgram, path, n, maxMapName)
		}
		ms.Pinning = ebpf.PinNone
	}
	var opts ebpf.CollectionOptions
	if prev != nil {
		opts.MapReplacements = map[string]*ebpf.Map{}
		for n, ms := range spec.Maps {
			if m := prev.maps[n]; m != nil && ms.Compatible(m) == nil {
				opts.MapReplacements[n] = m
			}
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, opts)
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("%w: %s (%s):\n%s", ErrVerifier, path, name, verifierLog(verr))
		}
		return nil, fmt.Errorf("%w %s: loading: %w", ErrProgram, path, err)
	}
	sum := sha256.Sum256(obj)
	u := &UserProgram{Prog: coll.Programs[name], Name: name, Digest: hex.EncodeToString(sum[:8]), maps: coll.Maps}
	return u, nil
}

// verifierLog is the end of the verifier's log, where it says what it refused (and, with the
// object's line information, the source line before it).
func verifierLog(verr *ebpf.VerifierError) string {
	lines := verr.Log
	if len(lines) > 30 {
		lines = append([]string{fmt.Sprintf("(%d lines before)", len(lines)-30)}, lines[len(lines)-30:]...)
	}
	return strings.Join(lines, "\n")
}
