package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"
)

// A container node may have its own root file system, `rootfs: DIR` (docs/security.md, "A
// node's own root"): a directory, absolute or relative to the topology file, that is the
// node's / instead of the host's root, read-only, with the node's private directories and /etc
// mounted in it as in other nodes.

// RootfsDirs are the directories a node's own root must have: trellis mounts the node's /etc,
// /run and /tmp and the host's /dev, /proc and /sys on them, and never makes anything in DIR.
var RootfsDirs = []string{"dev", "etc", "proc", "run", "sys", "tmp"}

// rootfs reads `rootfs`: the node's root directory, returned absolute and without symbolic
// links; "" if it cannot serve (a problem is recorded).
func (p *parser) rootfs(v *yaml.Node, field string) string {
	dir, ok := p.str(v, field)
	if !ok || p.hostPath(v, field, "remove `rootfs:` (the node then sees the machine's root read-only)") {
		return ""
	}
	if p.cluster {
		p.fail(v, field, "a node's own root directory is on one machine's disk: not yet in a cluster",
			"remove `rootfs:` (the node then sees its machine's root read-only), or run the network with `trellis up` on that machine")
		return ""
	}
	if dir == "" {
		p.fail(v, field, "the path is empty", "give the root directory's path, absolute or relative to the topology file")
		return ""
	}
	dir = p.besideFile(dir)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // the topology file's directory may be relative
	}
	msg, fix := checkRootfs(dir)
	if msg != "" {
		p.fail(v, field, msg, fix)
		return ""
	}
	resolved, _ := filepath.EvalSymlinks(dir) // checkRootfs resolved it
	return resolved
}

// checkRootfs says what keeps dir from being a node's root, and the fix; "" if nothing.
func checkRootfs(dir string) (msg, fix string) {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Sprintf("cannot use %s: %v", dir, err),
			"give an existing directory holding a root file system, e.g. one made with `mmdebstrap --variant=minbase bookworm DIR`"
	}
	fi, err := os.Stat(resolved)
	if err != nil || !fi.IsDir() {
		return dir + " is not a directory", "give the directory that holds the node's root file system, not a file or an image"
	}
	if host, err := os.Stat("/"); resolved == "/" || (err == nil && os.SameFile(fi, host)) {
		return dir + " is the host's root, which every node without `rootfs:` sees already",
			"remove `rootfs:`, or give a directory holding another root file system"
	}
	if fi.Mode().Perm()&0o005 != 0o005 {
		return fmt.Sprintf("%s has mode %04o: the node's root, an unprivileged user on the host, could not enter it", dir, fi.Mode().Perm()),
			"let every user read and enter it: chmod 755 " + dir
	}
	var missing []string
	for _, d := range RootfsDirs {
		if fi, err := os.Lstat(filepath.Join(resolved, d)); err != nil || !fi.IsDir() {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%s does not look like a root file system: it has no director%s %s (symbolic links do not count; trellis mounts on them and never changes %s)",
				dir, plural(len(missing), "y", "ies"), strings.Join(missing, ", "), dir),
			fmt.Sprintf("make them (cd %s && mkdir %s), or give a tree made with e.g. `mmdebstrap`", dir, strings.Join(missing, " "))
	}
	return "", ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// hasShell says whether root directory dir has an executable /bin/sh, its symbolic links
// resolved inside dir as the node will resolve them.
func hasShell(dir string) bool {
	rfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, "bin/sh", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0
}

// validateRootfs checks a node's rootfs against its kind and its exec commands.
func (p *parser) validateRootfs(n *Network, nd *Node, k NodeKind) {
	switch {
	case nd.Rootfs == "":
	case !p.takes(n, nd, k, KeyRootfs, Refusal{fmt.Sprintf("a %s node takes no rootfs", nd.Kind), "remove `rootfs:`, or make the node `kind: " + DefaultNodeKind + "`"}):
	case len(nd.Exec) > 0 && !hasShell(nd.Rootfs):
		p.add(n.NodeError(nd, "exec", fmt.Sprintf("the node's rootfs %s has no executable /bin/sh to run the exec: commands with", nd.Rootfs),
			"install a shell in it (e.g. a copy of busybox-static's /bin/busybox as bin/sh), or remove `exec:`"))
	}
}

// takes says whether node nd's kind k takes key (Taker), and refuses it at field key if not:
// in the kind's own words, or def's.
func (p *parser) takes(n *Network, nd *Node, k NodeKind, key string, def Refusal) bool {
	ok, why := k.takes(key)
	if ok {
		return true
	}
	if why == (Refusal{}) {
		why = def
	}
	p.add(n.NodeError(nd, key, why.Msg, why.Fix))
	return false
}
