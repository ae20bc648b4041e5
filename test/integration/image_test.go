//go:build integration

package integration

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/trellisnet/trellis/internal/oci"
)

// busyboxImage builds a small container image from the host's static busybox, without the
// internet: layer 1 has busybox with its applets as hard links to it, an /etc with a user
// "pc" (1000) and a directory /work; layer 2 replaces a file and a whiteout deletes one of
// layer 1. Its config sets Env, WorkingDir, User and an Entrypoint/Cmd that writes what it
// sees, then stays, as the node's main process.
func busyboxImage(t *testing.T, marker string) v1.Image {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("no busybox on the host (install busybox-static, see scripts/setup.sh): %v", err)
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	var l1 []tarEntry
	for _, d := range []string{"bin/", "etc/", "work/", "var/", "var/log/"} {
		l1 = append(l1, tarEntry{name: d, mode: 0o755})
	}
	l1 = append(l1, tarEntry{name: "bin/busybox", data: data, mode: 0o755})
	for _, a := range []string{"sh", "cat", "id", "pwd", "ping", "ip", "sleep", "echo", "ls"} {
		l1 = append(l1, tarEntry{name: "bin/" + a, link: "bin/busybox"})
	}
	l1 = append(l1,
		tarEntry{name: "etc/passwd", data: []byte("root:x:0:0:root:/root:/bin/sh\npc:x:1000:1000::/work:/bin/sh\n"), mode: 0o644},
		tarEntry{name: "etc/group", data: []byte("root:x:0:\npc:x:1000:\n"), mode: 0o644},
		tarEntry{name: "marker", data: []byte("old\n"), mode: 0o644},
		tarEntry{name: "doomed", data: []byte("deleted by layer 2\n"), mode: 0o644})
	l2 := []tarEntry{{name: "marker", data: []byte(marker + "\n"), mode: 0o644}, {name: ".wh.doomed"}}
	img, err := mutate.AppendLayers(empty.Image, tarLayer(t, l1), tarLayer(t, l2))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Env = []string{"PATH=/bin", "GREETING=hello-from-image"}
	cfg.Config.WorkingDir = "/work"
	cfg.Config.User = "pc"
	cfg.Config.Entrypoint = []string{"/bin/sh", "-c"}
	cfg.Config.Cmd = []string{`echo "$GREETING $(id -u):$(id -g) $(pwd)" > /tmp/main.out; exec sleep 100000`}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

type tarEntry struct {
	name, link string // link: a hard link to that entry
	symlink    string // a symbolic link to that path
	data       []byte
	mode       int64
}

func tarLayer(t *testing.T, entries []tarEntry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeReg, Size: int64(len(e.data)), ModTime: time.Unix(1e9, 0)}
		switch {
		case strings.HasSuffix(e.name, "/"):
			hdr.Typeflag = tar.TypeDir
		case e.link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, e.link
		case e.symlink != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, e.symlink, 0o777
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageCache points trellis's cache at a new directory for the test, enterable by the nodes.
func imageCache(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(dir), 0o755)
	t.Setenv("TRELLIS_IMAGE_CACHE", dir)
	return dir
}

const imageTopo = `name: %s
nodes:
  a:
    image: %s
    addresses: {eth1: [10.0.0.1/24]}
  b:
    image: %s
    addresses: {eth1: [10.0.0.2/24]}
    exec: ["echo \"exec $GREETING $(pwd) $(id -u)\" > /tmp/exec.out"]
links:
  - endpoints: [a:eth1, b:eth1]
`

// TestImagePull serves an image built from the host's busybox from a registry on 127.0.0.1
// (go-containerregistry's), brings up two networks of two nodes from it, and checks the
// image's layers, config and main process, the shared cache, and that rm refuses an image in
// use. It prints the time to pull and unpack the image the first time, the time to bring up a
// network from the cached image, and the disk the nodes use.
func TestImagePull(t *testing.T) {
	e := start(t)
	cache := imageCache(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	marker := "image-" + nonce()
	ref := host + "/lab/pc:1"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, busyboxImage(t, marker)); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(imageTopo, "img1", ref, ref)))
	first := time.Since(t0)
	t0 = time.Now()
	mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(imageTopo, "img2", ref, ref)))
	cached := time.Since(t0)

	if got := strings.TrimSpace(mustExec(t, e.state, "img1", "a", "cat", "/marker")); got != marker {
		t.Errorf("/marker is %q, want layer 2's %q", got, marker)
	}
	if out, _, err := execIn(t, e.state, "img1", "a", "cat", "/doomed"); err == nil {
		t.Errorf("/doomed, whited out by layer 2, is there: %q", out)
	}
	// The main process: the entrypoint, as the config's user, in its directory, with its Env.
	if got := strings.TrimSpace(mustExec(t, e.state, "img1", "a", "cat", "/tmp/main.out")); got != "hello-from-image 1000:1000 /work" {
		t.Errorf("the main process wrote %q, want %q", got, "hello-from-image 1000:1000 /work")
	}
	// It stays, a child of the node's PID 1: "PID (sleep) S 1 ..." in its /proc/PID/stat.
	stats := mustExec(t, e.state, "img1", "a", "sh", "-c", `for p in /proc/[0-9]*; do read -r s < $p/stat; echo "$s"; done`)
	if !strings.Contains(stats, "(sleep) S 1 ") {
		t.Errorf("the main process is not left running under the node's PID 1:\n%s", stats)
	}
	// exec: replaces the entrypoint, with the image's Env and WorkingDir, as the node's root.
	if got := strings.TrimSpace(mustExec(t, e.state, "img1", "b", "cat", "/tmp/exec.out")); got != "exec hello-from-image /work 0" {
		t.Errorf("exec: wrote %q, want %q", got, "exec hello-from-image /work 0")
	}
	if out, _, err := execIn(t, e.state, "img1", "b", "cat", "/tmp/main.out"); err == nil {
		t.Errorf("node b has exec:, yet the entrypoint ran: %q", out)
	}
	mustExec(t, e.state, "img1", "a", "ping", "-c", "1", "-W", "2", "10.0.0.2")
	mustExec(t, e.state, "img2", "b", "ping", "-c", "1", "-W", "2", "10.0.0.1")

	imgs, err := oci.NewStore(cache).List()
	if err != nil || len(imgs) != 1 {
		t.Fatalf("the cache has %d images (%v), want 1 shared by all nodes", len(imgs), err)
	}
	img := imgs[0]
	if n := len(oci.NodesUsing(img.Root())); n != 4 {
		t.Errorf("%d nodes run from %s, want 4", n, img.Root())
	}
	if fi, err := os.Stat(filepath.Join(img.Root(), "doomed")); err == nil {
		t.Errorf("the unpacked tree has the whited-out file: %v", fi.Name())
	}
	if out := mustTrellis(t, e.state, "image", "ls"); !strings.Contains(out, ref) || !strings.Contains(out, oci.ShortID(img.ID)) {
		t.Errorf("image ls does not list %s:\n%s", ref, out)
	}
	if _, errOut, err := trellis(t, e.state, "image", "rm", ref); err == nil || !strings.Contains(errOut, "in use by 4 running node") {
		t.Errorf("image rm of an image 4 nodes run: %v %s", err, errOut)
	}
	du := duBytes(t, cache)
	t.Logf("image %s: %.1f MiB unpacked (unpack %.2fs); first up (pull+unpack+2 nodes) %.2fs, second network from the cached image %.2fs; 4 nodes share it: the cache holds %.1f MiB in all, nothing per node on disk",
		ref, float64(img.Size)/(1<<20), img.Took.Seconds(), first.Seconds(), cached.Seconds(), float64(du)/(1<<20))

	mustTrellis(t, e.state, "down", "img1")
	mustTrellis(t, e.state, "down", "img2")
	mustTrellis(t, e.state, "image", "rm", ref)
	if imgs, _ := oci.NewStore(cache).List(); len(imgs) != 0 {
		t.Errorf("image rm left %d images", len(imgs))
	}
}

// duBytes is the disk space dir's files take.
func duBytes(t *testing.T, dir string) int64 {
	out, err := exec.Command("du", "-s", "-B1", dir).Output()
	var n int64
	if err == nil {
		_, err = fmt.Sscan(string(out), &n)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestImageBadSource: an image the registry does not have, and a registry that refuses, fail
// up with the reference in the error, and nothing is created.
func TestImageBadSource(t *testing.T) {
	e := start(t)
	imageCache(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"errors":[{"code":"DENIED","message":"go away"}]}`, http.StatusForbidden)
	}))
	defer refuse.Close()
	for _, ref := range []string{
		strings.TrimPrefix(reg.URL, "http://") + "/lab/nothing:1",
		strings.TrimPrefix(refuse.URL, "http://") + "/lab/pc:1",
	} {
		_, errOut, err := trellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(imageTopo, "bad", ref, ref)))
		if err == nil || !strings.Contains(errOut, "nodes.a.image: image "+ref+": no such image") {
			t.Errorf("up with %s: %v\n%s", ref, err, errOut)
		}
		if out := mustTrellis(t, e.state, "ls"); strings.Contains(out, "bad") {
			t.Errorf("a failed up left network bad:\n%s", out)
		}
	}
	e.assertClean()
}

// TestImageImport imports the image as a `docker save` archive and as an OCI layout, and
// brings up a node from each.
func TestImageImport(t *testing.T) {
	e := start(t)
	imageCache(t)
	dir := t.TempDir()
	marker := "import-" + nonce()
	img := busyboxImage(t, marker)
	saved := filepath.Join(dir, "pc.tar")
	tag, err := name.NewTag("lab/saved:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(saved, tag, img); err != nil {
		t.Fatal(err)
	}
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	other, err := mutate.Config(img, v1.Config{Entrypoint: []string{"/bin/sleep", "100000"}}) // another ID
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(other, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "lab/layout:2"})); err != nil {
		t.Fatal(err)
	}
	mustTrellis(t, e.state, "image", "import", saved)
	mustTrellis(t, e.state, "image", "import", string(lp))
	// The same layout as an OCI archive (a tar of it), under another name.
	lp2, err := layout.Write(filepath.Join(dir, "layout2"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp2.AppendImage(other, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "lab/archive:3"})); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "oci.tar")
	if out, err := exec.Command("tar", "-C", string(lp2), "-cf", archive, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	mustTrellis(t, e.state, "image", "import", archive)
	out := mustTrellis(t, e.state, "image", "ls")
	for _, want := range []string{"index.docker.io/lab/saved:1", "index.docker.io/lab/layout:2 index.docker.io/lab/archive:3"} {
		if !strings.Contains(out, want) {
			t.Errorf("image ls lacks %s:\n%s", want, out)
		}
	}
	mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(imageTopo, "imp", "lab/saved:1", "lab/layout:2")))
	for _, node := range []string{"a", "b"} {
		if got := strings.TrimSpace(mustExec(t, e.state, "imp", node, "cat", "/marker")); got != marker {
			t.Errorf("node %s: /marker is %q, want %q", node, got, marker)
		}
	}
	mustExec(t, e.state, "imp", "a", "ping", "-c", "1", "-W", "2", "10.0.0.2")
	// The node's cmd: and env: change the image's config: its entrypoint (sh -c) runs the
	// node's cmd, with the image's variable replaced and one added; the exec: line runs after.
	mustTrellis(t, e.state, "up", writeTopo(t, `name: over
nodes:
  c:
    image: lab/saved:1
    cmd: ['echo "$GREETING $ADDED $(id -u)" > /tmp/main.out; exec sleep 100000']
    env: {GREETING: overridden, ADDED: too}
    keep-entrypoint: true
    exec: ["echo exec $ADDED > /tmp/exec.out"]
`))
	if got := mustExec(t, e.state, "over", "c", "cat", "/tmp/main.out", "/tmp/exec.out"); got != "overridden too 1000\nexec too\n" {
		t.Errorf("the node's cmd and env: the main process and exec wrote %q, want %q", got, "overridden too 1000\nexec too\n")
	}
	mustTrellis(t, e.state, "down", "over")
	mustTrellis(t, e.state, "down", "imp")
	if out := mustTrellis(t, e.state, "image", "prune"); !strings.Contains(out, "2 container images removed") {
		t.Errorf("prune: %s", out)
	}
}
