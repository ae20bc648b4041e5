package clab

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxBindFiles is the most files the binds of one node may copy into it.
const maxBindFiles = 1000

// file is a trellis `files:` entry made from a bind: the host file `source` (as the
// containerlab file names it, relative to its directory or absolute) copied to `path` in the
// node with the host file's permission bits.
type file struct {
	path, source string
	mode         fs.FileMode
	o            origin
}

// bind is one parsed `binds:` item.
type bind struct {
	src, dst string
	o        origin
}

// binds turns a node's merged binds into the files copied into it: a file bound is copied, a
// directory bound has its files copied (recursively). A bind of a destination that a more
// specific definition binds again is replaced, as in containerlab.
func (r *reader) binds(items []val, node, dir string) []file {
	byDst := map[string]bind{}
	for _, it := range items {
		if b, ok := r.parseBind(it, node); ok {
			byDst[b.dst] = b
		}
	}
	dsts := make([]string, 0, len(byDst))
	for d := range byDst {
		dsts = append(dsts, d)
	}
	slices.Sort(dsts)
	var out []file
	for _, d := range dsts {
		out = append(out, r.expand(byDst[d], dir)...)
	}
	if len(out) > maxBindFiles {
		r.fail(&yaml.Node{Line: out[maxBindFiles].o.line}, out[maxBindFiles].o.field,
			fmt.Sprintf("the binds copy more than %d files into node %s", maxBindFiles, node), "bind fewer files")
		return nil
	}
	return out
}

// parseBind reads SRC:DST[:MODE], with containerlab's __clabNodeName__ in SRC replaced.
func (r *reader) parseBind(it val, node string) (bind, bool) {
	at := &yaml.Node{Line: it.o.line}
	parts := strings.Split(it.s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		r.fail(at, it.o.field, fmt.Sprintf("%q is not a bind", it.s), "write HOST_PATH:NODE_PATH, e.g. r1/frr.conf:/etc/frr/frr.conf")
		return bind{}, false
	}
	src := strings.ReplaceAll(parts[0], "__clabNodeName__", node)
	dst := parts[1]
	if len(parts) == 3 && parts[2] != "ro" {
		msg := fmt.Sprintf("trellis cannot honour the bind mode %q: it copies host files into the node (read-only: the node's changes never reach the host)", parts[2])
		if parts[2] == "rw" {
			msg = "trellis cannot honour :rw: it copies host files into the node, and never lets a node write a host file (docs/security.md)"
		}
		r.fail(at, it.o.field, msg, "remove the mode, or use :ro")
		return bind{}, false
	}
	switch {
	case src == "" || strings.HasPrefix(src, "~"):
		r.fail(at, it.o.field, fmt.Sprintf("%q is not a host path trellis reads", parts[0]), "give a path relative to the containerlab file, or an absolute one")
	case strings.Contains(src, "__clab"):
		r.fail(at, it.o.field, fmt.Sprintf("%q names a directory containerlab makes for the lab; trellis makes none", parts[0]),
			"give a path relative to the containerlab file, or an absolute one")
	case !path.IsAbs(dst):
		r.fail(at, it.o.field, fmt.Sprintf("%q is not an absolute path in the node", dst), "write it from /, e.g. /etc/frr/frr.conf")
	default:
		return bind{src: src, dst: path.Clean(dst), o: it.o}, true
	}
	return bind{}, false
}

// expand lists the files a bind copies: the file itself, or every file under the directory.
func (r *reader) expand(b bind, dir string) []file {
	at := &yaml.Node{Line: b.o.line}
	host := b.src
	if !filepath.IsAbs(host) {
		host = filepath.Join(dir, host)
	}
	fi, err := os.Stat(host)
	switch {
	case err != nil:
		r.fail(at, b.o.field, fmt.Sprintf("cannot read %s: %v", host, err), "give a path relative to the containerlab file, or an absolute one")
		return nil
	case fi.Mode().IsRegular():
		return []file{{path: b.dst, source: b.src, mode: fi.Mode().Perm(), o: b.o}}
	case !fi.IsDir():
		r.fail(at, b.o.field, fmt.Sprintf("%s is neither a regular file nor a directory", host), "bind regular files or directories of them")
		return nil
	}
	var out []file
	err = filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(host, p)
		fi, err := os.Stat(p) // a symbolic link to a file is copied as the file
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		out = append(out, file{path: path.Join(b.dst, filepath.ToSlash(rel)), source: filepath.Join(b.src, rel), mode: fi.Mode().Perm(), o: b.o})
		if len(out) > maxBindFiles {
			return fmt.Errorf("more than %d files under %s", maxBindFiles, host)
		}
		return nil
	})
	if err != nil {
		r.fail(at, b.o.field, "cannot copy the directory: "+err.Error(), "bind a directory of at most 1000 regular files")
		return nil
	}
	return out
}
