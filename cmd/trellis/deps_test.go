package main

import (
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// notLinked are the packages the product binary must not link, each with every package under
// it: the bench and its plots (cmd/trellis-bench links them), Go's testing package, the test
// cluster's etcd, and etcd's server and test code.
var notLinked = []string{
	"github.com/trellisnet/trellis/internal/bench", "github.com/trellisnet/trellis/internal/cluster/etcdtest",
	"gonum.org/v1/plot", "codeberg.org/go-latex", "codeberg.org/go-pdf", "codeberg.org/go-fonts",
	"testing", "go.etcd.io/etcd/server", "go.etcd.io/etcd/tests",
}

// forbidden says whether pkg is one of notLinked or under one.
func forbidden(pkg string) bool {
	for _, p := range notLinked {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// TestProductLinksNoBench: trellis (this package and everything it imports, as `go list -deps`
// lists what `go build` links) imports none of notLinked; a failure names who imports it.
func TestProductLinksNoBench(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command lists trellis's packages: %v (install Go, or put it on PATH)", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := map[string]bool{}
	importers := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		deps[pkg] = true
		for _, imp := range strings.Fields(imports) {
			importers[imp] = append(importers[imp], pkg)
		}
	}
	if !deps["github.com/trellisnet/trellis/internal/cli"] {
		t.Fatalf("go list -deps lists no internal/cli: not the trellis command's packages:\n%s", out)
	}
	for _, pkg := range slices.Sorted(maps.Keys(deps)) {
		if forbidden(pkg) {
			t.Errorf("trellis links %s, imported by %s: the bench's code and test code belong to cmd/trellis-bench and tests", pkg, strings.Join(importers[pkg], ", "))
		}
	}
}

// The list catches what it should, and not what only shares a prefix.
func TestForbidden(t *testing.T) {
	for pkg, want := range map[string]bool{
		"testing":              true,
		"testing/fstest":       true,
		"gonum.org/v1/plot/vg": true,
		"github.com/trellisnet/trellis/internal/bench":        true,
		"github.com/trellisnet/trellis/internal/bench/report": true,
		"go.etcd.io/etcd/server/v3/embed":                     true,
		"go.etcd.io/etcd/client/v3":                           false,
		"github.com/trellisnet/trellis/internal/benchmark":    false,
		"github.com/trellisnet/trellis/internal/cluster":      false,
		"testingutil": false,
	} {
		if got := forbidden(pkg); got != want {
			t.Errorf("forbidden(%q) = %v, want %v", pkg, got, want)
		}
	}
}
