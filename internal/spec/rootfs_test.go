package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// makeRoot makes a directory that looks like a root file system: the RootfsDirs, and with
// shell a /bin/sh that is an absolute link to /bin/busybox (resolved inside the root).
func makeRoot(t *testing.T, dir string, shell bool) {
	t.Helper()
	for _, d := range append([]string{"bin"}, RootfsDirs...) {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if shell {
		if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), []byte("#!x\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/bin/busybox", filepath.Join(dir, "bin", "sh")); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRootfs checks `rootfs:`: an existing directory that looks like a root, relative to the
// topology file or absolute, not the host's root, usable by an unprivileged user, on a
// container node; exec: needs its /bin/sh. Each problem names file, line and field, with a fix.
func TestRootfs(t *testing.T) {
	dir := t.TempDir()
	root, bare, closed, partial := filepath.Join(dir, "root"), filepath.Join(dir, "bare"), filepath.Join(dir, "closed"), filepath.Join(dir, "partial")
	makeRoot(t, root, true)
	makeRoot(t, bare, false)
	makeRoot(t, closed, false)
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"etc", "proc", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(partial, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/run", filepath.Join(partial, "run")); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"link": "root", "hostroot": "/"} {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	topo := filepath.Join(dir, "topo.yaml")
	head := "name: t\nnodes:\n  r1:\n"
	cases := []struct {
		name, body string
		want       string // the node's Rootfs; "" with errs
		errs       []string
	}{
		{"relative", "    rootfs: root\n", root, nil},
		{"absolute, with exec", "    rootfs: " + root + "\n    exec: [true]\n", root, nil},
		{"through a link", "    rootfs: link\n", root, nil},
		{"without a shell, no exec", "    rootfs: bare\n", bare, nil},
		{"missing", "    rootfs: nope\n", "", []string{":4: nodes.r1.rootfs: cannot use " + dir + "/nope: lstat " + dir + "/nope: no such file or directory; give an existing directory holding a root file system, e.g. one made with `mmdebstrap --variant=minbase bookworm DIR`"}},
		{"a file", "    rootfs: file\n", "", []string{":4: nodes.r1.rootfs: " + dir + "/file is not a directory; give the directory that holds the node's root file system, not a file or an image"}},
		{"the host's root", "    rootfs: /\n", "", []string{":4: nodes.r1.rootfs: / is the host's root, which every node without `rootfs:` sees already; remove `rootfs:`, or give a directory holding another root file system"}},
		{"a link to the host's root", "    rootfs: hostroot\n", "", []string{":4: nodes.r1.rootfs: " + dir + "/hostroot is the host's root, which every node without `rootfs:` sees already; remove `rootfs:`, or give a directory holding another root file system"}},
		{"closed", "    rootfs: closed\n", "", []string{":4: nodes.r1.rootfs: " + closed + " has mode 0700: the node's root, an unprivileged user on the host, could not enter it; let every user read and enter it: chmod 755 " + closed}},
		{"not a root", "    rootfs: partial\n", "", []string{":4: nodes.r1.rootfs: " + partial + " does not look like a root file system: it has no directories dev, run (symbolic links do not count; trellis mounts on them and never changes " + partial + "); make them (cd " + partial + " && mkdir dev run), or give a tree made with e.g. `mmdebstrap`"}},
		{"empty", "    rootfs: \"\"\n", "", []string{":4: nodes.r1.rootfs: the path is empty; give the root directory's path, absolute or relative to the topology file"}},
		{"a list", "    rootfs: [root]\n", "", []string{":4: nodes.r1.rootfs: expected a single value; write it on one line after the colon, or as a `|` block"}},
		{"exec without a shell", "    rootfs: bare\n    exec: [true]\n", "", []string{":5: nodes.r1.exec: the node's rootfs " + bare + " has no executable /bin/sh to run the exec: commands with; install a shell in it (e.g. a copy of busybox-static's /bin/busybox as bin/sh), or remove `exec:`"}},
		{"on a vm", "    kind: vm\n    rootfs: root\n", "", []string{":5: nodes.r1.rootfs: a vm node boots its own disk, not a directory; remove `rootfs:`, and give the VM its own root file system with `vm: {disk: IMAGE}`"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := Parse(topo, []byte(head+c.body))
			if c.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := n.Nodes[0].Rootfs; got != c.want {
					t.Errorf("Rootfs = %q, want %q", got, c.want)
				}
				return
			}
			wantErrors(t, err, topo, c.errs)
		})
	}
}

// A cluster's file may not name a directory of one machine.
func TestRootfsNotInCluster(t *testing.T) {
	dir := t.TempDir()
	makeRoot(t, filepath.Join(dir, "root"), true)
	topo := filepath.Join(dir, "topo.yaml")
	_, err := ParseCluster(topo, []byte("name: t\nnodes:\n  r1:\n    rootfs: root\n"), nil)
	want := topo + ":4: nodes.r1.rootfs: a node's own root directory is on one machine's disk: not yet in a cluster; remove `rootfs:` (the node then sees its machine's root read-only), or run the network with `trellis up` on that machine"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}
