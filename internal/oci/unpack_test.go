package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"
)

// entry is one tar entry of a test layer: "d" dir, "f" file, "l" symlink, "h" hard link.
type entry struct {
	typ, name, data string
	uid             int
}

func testLayer(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Uid: e.uid, Gid: e.uid}
		switch e.typ {
		case "d":
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		case "f":
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.data))
		case "l":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.data
		case "h":
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, e.data
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == "f" {
			io.WriteString(tw, e.data)
		}
	}
	tw.Close()
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func testImage(t *testing.T, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// tree lists root's files as "path=content", "path->link" and "path/" for directories.
func tree(t *testing.T, root string) string {
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		rel, _ := filepath.Rel(root, p)
		switch {
		case err != nil || rel == ".":
		case fi.Mode()&os.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			out = append(out, rel+"->"+to)
		case fi.IsDir():
			out = append(out, rel+"/")
		default:
			data, _ := os.ReadFile(p)
			out = append(out, rel+"="+string(data))
		}
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, " ")
}

func TestUnpackLayers(t *testing.T) {
	outside := t.TempDir()
	cases := []struct {
		name   string
		layers [][]entry
		want   string
	}{
		{"whiteout removes a file of a layer below", [][]entry{
			{{"d", "a/", "", 0}, {"f", "a/x", "x", 0}, {"f", "a/y", "y", 0}},
			{{"f", "a/.wh.x", "", 0}},
		}, "a/ a/y=y"},
		{"whiteout of a directory removes it whole", [][]entry{
			{{"f", "a/b/c", "c", 0}, {"f", "k", "k", 0}},
			{{"f", ".wh.a", "", 0}},
		}, "k=k"},
		{"opaque directory hides what was below, keeps what its layer adds", [][]entry{
			{{"f", "d/old", "o", 0}, {"f", "d/sub/deep", "s", 0}},
			{{"d", "d/", "", 0}, {"f", "d/new", "n", 0}, {"f", "d/.wh..wh..opq", "", 0}, {"f", "d/later", "l", 0}},
		}, "d/ d/later=l d/new=n"},
		{"a file changed by one layer and deleted by the next", [][]entry{
			{{"f", "etc/conf", "v1", 0}},
			{{"f", "etc/conf", "v2", 0}},
			{{"f", "etc/.wh.conf", "", 0}},
		}, "etc/"},
		{"a file replaces a directory, and a directory a file", [][]entry{
			{{"f", "x/inner", "i", 0}, {"f", "y", "file", 0}},
			{{"f", "x", "now a file", 0}, {"d", "y/", "", 0}, {"f", "y/z", "z", 0}},
		}, "x=now a file y/ y/z=z"},
		{"entries through a symbolic link stay in the root", [][]entry{
			{{"l", "esc", outside, 0}, {"l", "up", "../../..", 0}, {"d", "bin/", "", 0}, {"l", "sbin", "/bin", 0}},
			{{"f", "up/probe", "p", 0}, {"f", "sbin/tool", "t", 0}},
		}, "bin/ bin/tool=t esc->" + outside + " probe=p sbin->/bin up->../../.."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var layers []v1.Layer
			for _, l := range c.layers {
				layers = append(layers, testLayer(t, l...))
			}
			root := t.TempDir()
			if _, err := unpack(context.Background(), testImage(t, layers...), root); err != nil {
				t.Fatal(err)
			}
			if got := tree(t, root); got != c.want {
				t.Errorf("tree\n got %s\nwant %s", got, c.want)
			}
		})
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("a layer wrote outside the root: %v", ents)
	}
}

func TestUnpackHardLinksAndOwners(t *testing.T) {
	root := t.TempDir()
	img := testImage(t,
		testLayer(t, entry{"f", "usr/bin/busybox", "bb", 0}, entry{"h", "bin/sh", "usr/bin/busybox", 0}, entry{"f", "home/u/f", "u", 1000}),
		testLayer(t, entry{"h", "bin/ls", "/usr/bin/busybox", 0}))
	if _, err := unpack(context.Background(), img, root); err != nil {
		t.Fatal(err)
	}
	var a, b, c, u unix.Stat_t
	for p, st := range map[string]*unix.Stat_t{"usr/bin/busybox": &a, "bin/sh": &b, "bin/ls": &c, "home/u/f": &u} {
		if err := unix.Lstat(filepath.Join(root, p), st); err != nil {
			t.Fatal(err)
		}
	}
	if a.Ino != b.Ino || a.Ino != c.Ino || a.Nlink != 3 {
		t.Errorf("hard links: inodes %d %d %d, %d links; want one inode, 3 links", a.Ino, b.Ino, c.Ino, a.Nlink)
	}
	if u.Uid != 1000 || u.Gid != 1000 || a.Uid != 0 {
		t.Errorf("owners: home/u/f %d:%d, busybox %d; want the image's 1000:1000 and 0", u.Uid, u.Gid, a.Uid)
	}
	bad := testImage(t, testLayer(t, entry{"h", "bin/sh", "nowhere", 0}))
	if _, err := unpack(context.Background(), bad, t.TempDir()); !errors.Is(err, ErrLayer) {
		t.Errorf("a hard link to nothing: %v, want ErrLayer", err)
	}
}

func TestUnpackRefusesDigestMismatch(t *testing.T) {
	img := testImage(t, testLayer(t, entry{"f", "a", "real", 0}))
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	other, _ := testLayer(t, entry{"f", "a", "other", 0}).DiffID()
	cfg.RootFS.DiffIDs[0] = other // the config promises another layer than the one served
	forged, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = unpack(context.Background(), forged, t.TempDir())
	if !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), other.String()) {
		t.Fatalf("unpack of a layer that is not its diff_id: %v, want ErrDigest naming %s", err, other)
	}
}
