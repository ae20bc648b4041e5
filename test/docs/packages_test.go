// Package docs checks that the documentation of the code base matches the code: every Go
// package has a package comment, and README.md's table of packages (its Development section)
// lists every package of the module and nothing that does not exist.
package docs

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// root is the module's root, two levels above this package.
const root = "../.."

// packageDirs returns every directory under cmd, internal and test that holds non-test Go
// files, relative to root. Directories of other modules (tools/...) are not walked.
func packageDirs(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, top := range []string{"cmd", "internal", "test"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				rel, err := filepath.Rel(root, filepath.Dir(path))
				if err != nil {
					return err
				}
				seen[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var dirs []string
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}

// TestPackageComments: every package has a comment ("// Package x ..." or, for a main
// package, "// Command x ...") in one of its files, as go doc shows it.
func TestPackageComments(t *testing.T) {
	for _, dir := range packageDirs(t) {
		pkgs, err := parser.ParseDir(token.NewFileSet(), filepath.Join(root, dir), func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for name, pkg := range pkgs {
			documented := false
			for _, f := range pkg.Files {
				if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
					documented = true
				}
			}
			if !documented {
				t.Errorf("%s: package %s has no package comment: add \"// Package %s ...\" (or \"// Command ...\" for a main package) above its package clause in one file", dir, name, name)
			}
		}
	}
}

// readmePackages returns the first word of every line of README.md's Development block that
// names a directory of the repository (the table of packages).
func readmePackages(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]int{}
	sc := bufio.NewScanner(f)
	inDev, inBlock, line := false, false, 0
	for sc.Scan() {
		line++
		text := sc.Text()
		switch {
		case strings.HasPrefix(text, "## "):
			inDev = text == "## Development"
		case inDev && strings.HasPrefix(text, "```"):
			if inBlock {
				return listed
			}
			inBlock = true
		case inDev && inBlock:
			if fields := strings.Fields(text); len(fields) > 0 && strings.Contains(fields[0], "/") {
				listed[fields[0]] = line
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatal("README.md: no code block in its \"## Development\" section: the table of packages is missing")
	return nil
}

// TestReadmeListsPackages: README.md's table names every package, and every name in it exists.
func TestReadmeListsPackages(t *testing.T) {
	listed := readmePackages(t)
	for _, dir := range packageDirs(t) {
		if _, ok := listed[dir]; !ok {
			t.Errorf("README.md: the table of packages (## Development) does not list %s: add a line \"%s  <what it does>\"", dir, dir)
		}
	}
	for name, line := range listed {
		if _, err := os.Stat(filepath.Join(root, name)); err != nil {
			t.Errorf("README.md:%d: the table of packages lists %s, which does not exist: remove the line or correct the path", line, name)
		}
	}
}
