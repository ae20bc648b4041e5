//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/trellisnet/trellis/internal/testkit"
)

// hostLayer is a layer of the host's files, without the internet: each of paths (a file, or a
// directory with everything under it) at its own path, symbolic links followed, every shared
// library the ELF programs among them need (as ldd finds them, the loader included), and the
// directories on the way; then extra (files the image adds, replacing host ones of the same
// name).
func hostLayer(t *testing.T, paths []string, extra []tarEntry) v1.Layer {
	t.Helper()
	files := map[string]bool{}
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
				files[path] = true
			}
			return nil
		})
		if err != nil {
			t.Fatalf("host files for an image: %v", err)
		}
	}
	for p := range files {
		for _, lib := range libraries(t, p) {
			files[lib] = true
		}
	}
	byName := map[string]tarEntry{}
	for p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("host files for an image: %v", err)
		}
		fi, _ := os.Stat(p)
		byName[strings.TrimPrefix(p, "/")] = tarEntry{name: strings.TrimPrefix(p, "/"), data: data, mode: int64(fi.Mode().Perm())}
	}
	for _, e := range extra {
		byName[e.name] = e
	}
	for name := range byName {
		for d := filepath.Dir(strings.TrimSuffix(name, "/")); d != "."; d = filepath.Dir(d) {
			if _, ok := byName[d+"/"]; !ok {
				byName[d+"/"] = tarEntry{name: d + "/", mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names) // a directory before what it holds
	entries := make([]tarEntry, 0, len(names))
	for _, hardLinks := range []bool{false, true} { // hard links after their targets
		for _, name := range names {
			if e := byName[name]; (e.link != "") == hardLinks {
				entries = append(entries, e)
			}
		}
	}
	return tarLayer(t, entries)
}

// libraries lists the shared libraries an ELF file needs, by ldd; nothing for another file.
func libraries(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	magic := make([]byte, 4)
	_, err = f.Read(magic)
	f.Close()
	if err != nil || !bytes.Equal(magic, []byte("\x7fELF")) {
		return nil
	}
	out, err := exec.Command("ldd", path).Output()
	if err != nil { // "not a dynamic executable": a static one
		return nil
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		case len(f) >= 2 && f[1] == "=>":
			t.Fatalf("ldd %s: %s not found", path, f[0])
		}
	}
	return libs
}

// busyboxEntries are the host's static busybox as /bin/busybox with the applets as hard links.
func busyboxEntries(t *testing.T, applets ...string) []tarEntry {
	t.Helper()
	bb := testkit.RequireTool(t, "busybox", "scripts/setup.sh installs busybox-static")
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	entries := []tarEntry{{name: "bin/busybox", data: data, mode: 0o755}}
	for _, a := range applets {
		entries = append(entries, tarEntry{name: "bin/" + a, link: "bin/busybox"})
	}
	return entries
}

// imageOf makes an image of layers with cfg as its config.
func imageOf(t *testing.T, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", "amd64", cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}
