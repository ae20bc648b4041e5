//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/trellisnet/trellis/internal/oci"
	"github.com/trellisnet/trellis/internal/testkit"
)

// The images examples/clab/frr01/frr01.clab.yml names.
const (
	frr01Router = "quay.io/frrouting/frr:10.5.1"
	frr01PC     = "wbitt/network-multitool:3.22.2"
)

// frrStart is the FRR image's entrypoint, as FRR's own Debian image starts: the daemons
// /etc/frr/daemons asks for, by frrinit.sh (watchfrr, then vtysh -b loads frr.conf), then it
// stays.
const frrStart = `#!/bin/bash
set -e
chown -R frr:frr /etc/frr
/usr/lib/frr/frrinit.sh start
exec sleep 2147483647
`

// frrImage builds an FRR image from the host's FRR (Debian's frr package, installed by
// scripts/setup.sh): its daemons and scripts, vtysh, /etc/frr's defaults, the libraries they
// need, bash for FRR's scripts, coreutils' install and busybox for the tools they call, user
// frr, and /var/run a link to /run as in Debian.
func frrImage(t *testing.T) v1.Image {
	t.Helper()
	testkit.RequireFile(t, "/usr/lib/frr/frrinit.sh", "scripts/setup.sh installs frr (Debian's package)")
	testkit.RequireFile(t, "/bin/bash", "apt-get install bash")
	extra := busyboxEntries(t, "sh", "cat", "chown", "chmod", "mkdir", "grep", "tr", "sed", "sleep", "id", "ip",
		"ping", "ps", "rm", "ln", "ls", "kill", "echo", "cut", "head", "tail", "touch", "dirname", "basename", "pidof", "true")
	extra = append(extra,
		tarEntry{name: "etc/passwd", data: []byte("root:x:0:0:root:/root:/bin/sh\nfrr:x:100:101:FRR:/nonexistent:/bin/false\n"), mode: 0o644},
		tarEntry{name: "etc/group", data: []byte("root:x:0:\nfrr:x:101:\nfrrvty:x:102:frr\n"), mode: 0o644},
		// Debian's vtysh asks PAM unless vtysh.conf lets the user in (the image has no PAM
		// configuration), and frrinit.sh's vtysh -b loads frr.conf.
		tarEntry{name: "etc/frr/vtysh.conf", data: []byte("service integrated-vtysh-config\nusername root nopassword\n"), mode: 0o640},
		tarEntry{name: "usr/lib/frr/docker-start", data: []byte(frrStart), mode: 0o755},
		tarEntry{name: "var/run", symlink: "../run"},
		tarEntry{name: "var/log/", mode: 0o755}, tarEntry{name: "var/lib/", mode: 0o755}, tarEntry{name: "var/tmp/", mode: 0o1777})
	layer := hostLayer(t, []string{"/usr/lib/frr", "/usr/lib/x86_64-linux-gnu/frr", "/usr/bin/vtysh", "/etc/frr", "/bin/bash", "/usr/bin/install"}, extra)
	return imageOf(t, v1.Config{Entrypoint: []string{"/usr/lib/frr/docker-start"}, Env: []string{"PATH=/usr/bin:/bin:/usr/lib/frr"}}, layer)
}

// pcImage builds the PCs' image from the host's busybox: what frr01's PCs run in exec (ip,
// and ping to test), and an entrypoint that notes it ran and stays (network-multitool's runs
// a web server).
func pcImage(t *testing.T) v1.Image {
	t.Helper()
	entries := append(busyboxEntries(t, "sh", "ip", "ping", "cat", "sleep", "echo"),
		tarEntry{name: "etc/", mode: 0o755}, tarEntry{name: "etc/passwd", data: []byte("root:x:0:0:root:/root:/bin/sh\n"), mode: 0o644})
	return imageOf(t, v1.Config{Entrypoint: []string{"/bin/sh", "-c"},
		Cmd: []string{"echo entrypoint ran > /tmp/entrypoint.out; exec sleep 2147483647"}, Env: []string{"PATH=/bin"}}, tarLayer(t, entries))
}

// TestClabFrr01 brings up containerlab's frr01 lab from its upstream file, unmodified
// (examples/clab/frr01): three FRR routers in an OSPF ring and a PC on each. Its two images are
// built here from the host's FRR and busybox, saved as one `docker save` archive under the names
// the file uses, and imported, as a machine without the internet gets them. It waits for OSPF
// to give every PC a route to the others, pings PC to PC across the routers, and prints the
// time to unpack the images, to start the lab's nodes from the cached images, and the disk
// they use.
func TestClabFrr01(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	cache := imageCache(t)
	archive := filepath.Join(t.TempDir(), "frr01-images.tar")
	refs := map[name.Reference]v1.Image{}
	for ref, img := range map[string]v1.Image{frr01Router: frrImage(t), frr01PC: pcImage(t)} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		refs[tag] = img
	}
	if err := tarball.MultiRefWriteToFile(archive, refs); err != nil {
		t.Fatal(err)
	}
	mustTrellis(t, e.state, "image", "import", archive)
	lab := filepath.Join(root, "examples/clab/frr01/frr01.clab.yml")
	t0 := time.Now()
	mustTrellis(t, e.state, "up", lab)
	upTook := time.Since(t0)

	pcs := map[string]string{"PC1": "192.168.11.2", "PC2": "192.168.12.2", "PC3": "192.168.13.2"}
	deadline := time.Now().Add(75 * time.Second) // OSPF waits 40 s on broadcast links before electing
	for from := range pcs {
		for to, addr := range pcs {
			if from == to {
				continue
			}
			for tryPing(t, e.state, "frr01", from, addr) != nil {
				if time.Now().After(deadline) {
					out, errOut, _ := execIn(t, e.state, "frr01", "router1", "vtysh", "-c", "show ip ospf neighbor", "-c", "show ip route")
					ps, _, _ := execIn(t, e.state, "frr01", "router1", "ps")
					log, _ := os.ReadFile(filepath.Join(e.state, "logs", "frr01", "router1.log"))
					t.Fatalf("%s cannot ping %s (%s) %.0f s after up; router1 says:\n%s%s\nits processes:\n%s\nits log:\n%s",
						from, to, addr, time.Since(t0).Seconds(), out, errOut, ps, log)
				}
				time.Sleep(time.Second)
			}
		}
	}
	converged := time.Since(t0)
	if out := mustExec(t, e.state, "frr01", "router1", "vtysh", "-c", "show ip ospf neighbor"); strings.Count(out, "Full") != 2 {
		t.Errorf("router1 has not 2 full OSPF neighbours:\n%s", out)
	}
	// router2 learnt the other PCs' LANs by OSPF and installed the routes.
	if out := mustExec(t, e.state, "frr01", "router2", "vtysh", "-c", "show ip route ospf"); !strings.Contains(out, "O>* 192.168.11.0/24") ||
		!strings.Contains(out, "O>* 192.168.13.0/24") {
		t.Errorf("router2 has no OSPF routes to PC1's and PC3's LANs:\n%s", out)
	}
	// The PCs' exec ran after their image's entrypoint, which still runs (keep-entrypoint).
	for pc := range pcs {
		if got := mustExec(t, e.state, "frr01", pc, "cat", "/tmp/entrypoint.out"); got != "entrypoint ran\n" {
			t.Errorf("%s: the entrypoint wrote %q", pc, got)
		}
	}
	// The lab's addresses (192.168.0.0/16, 10.10.10.0/24) stay in its nodes: none in the host's routes.
	if out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output(); err != nil ||
		strings.Contains(string(out), "192.168.11.") || strings.Contains(string(out), "10.10.10.") {
		t.Errorf("the host's routes name the lab's addresses (%v):\n%s", err, out)
	}
	figures(t, cache, upTook, converged)

	mustTrellis(t, e.state, "down", lab)
	mustTrellis(t, e.state, "image", "rm", frr01Router, frr01PC)
	e.assertClean()
}

// figures prints the images' unpack times and sizes, and the disk their 6 nodes use.
func figures(t *testing.T, cache string, up, converged time.Duration) {
	imgs, err := oci.NewStore(cache).List()
	if err != nil || len(imgs) != 2 {
		t.Fatalf("the cache has %d images (%v), want 2", len(imgs), err)
	}
	var parts []string
	for _, img := range imgs {
		n := len(oci.NodesUsing(img.Root()))
		if n != 3 {
			t.Errorf("%d nodes run from %v, want 3", n, img.Refs)
		}
		parts = append(parts, fmt.Sprintf("%s: %.1f MiB unpacked in %.2fs, shared by %d nodes", img.Refs[0], float64(img.Size)/(1<<20), img.Took.Seconds(), n))
	}
	t.Logf("frr01: %s; up of the 6 nodes from the cached images %.2fs (%.2fs a node), PC to PC pings %.1fs after up began; the cache holds %.1f MiB in all, nothing per node on disk",
		strings.Join(parts, "; "), up.Seconds(), up.Seconds()/6, converged.Seconds(), float64(duBytes(t, cache))/(1<<20))
}
