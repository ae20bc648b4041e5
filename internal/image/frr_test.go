package image

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cavaliergopher/cpio"

	"github.com/trellisnet/trellis/internal/pkgfiles"
	"github.com/trellisnet/trellis/internal/testkit"
)

// TestFRR collects the host's FRR and reads the archive back: the daemons with libfrr (found
// through their RUNPATH), the init scripts but not the Python tools, vtysh, /etc/frr with the
// package's owner, and the frr accounts.
func TestFRR(t *testing.T) {
	testkit.RequireFile(t, filepath.Join(frrDaemons, "zebra"), "FRR is not installed: scripts/setup.sh installs frr")
	c := &collection{files: map[string]*entry{}}
	for _, p := range []string{"/usr/bin/busybox", "/usr/bin/bash"} {
		if err := c.program(p); err != nil {
			t.Fatal(err)
		}
	}
	c.add(&entry{path: "/bin/bash", link: "/usr/bin/bash"})
	if err := c.frr(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/usr/lib/frr/zebra", "/usr/lib/frr/ospfd", "/usr/lib/frr/watchfrr", "/usr/lib/frr/frrinit.sh",
		"/usr/lib/frr/frrcommon.sh", "/usr/bin/vtysh", "/usr/bin/install", "/etc/pam.d/frr", "/lib/x86_64-linux-gnu/security/pam_permit.so", "/usr/lib/x86_64-linux-gnu/frr/libfrr.so.0", "/etc/frr/daemons"} {
		if c.files[p] == nil {
			t.Errorf("no %s in the image", p)
		}
	}
	if c.files["/usr/lib/frr/frr-reload.py"] != nil {
		t.Error("a Python tool went in without Python")
	}
	frr, err := user.Lookup("frr")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.users) != 1 || !strings.HasPrefix(c.users[0], "frr:x:"+frr.Uid+":") || len(c.groups) != 2 {
		t.Errorf("users %q, groups %q: want the host's frr, and frr and frrvty", c.users, c.groups)
	}
	path := filepath.Join(t.TempDir(), "initrd")
	if err := c.writeCpio(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]*cpio.Header{}
	r := cpio.NewReader(f)
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got["/"+h.Name] = h
	}
	uid, _ := strconv.Atoi(frr.Uid)
	for _, p := range []string{"/etc/frr", "/etc/frr/daemons"} {
		if h := got[p]; h == nil || h.Uid != uid {
			t.Errorf("%s: header %+v, want owner %d (frr)", p, h, uid)
		}
	}
	if h := got["/etc/frr"]; h == nil || !h.Mode.IsDir() {
		t.Errorf("/etc/frr: header %+v, want a directory", h)
	}
}

// TestFRRMissing refuses an image with FRR on a host without it, or without its accounts.
func TestFRRMissing(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "passwd"), []byte("root:x:0:0::/root:/bin/sh\n"), 0o644)
	cases := []struct {
		name    string
		daemons string
		etc     string
	}{
		{"no daemons", filepath.Join(dir, "nope"), dir},
		{"no frr user", frrDaemons, dir},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.daemons == frrDaemons {
				testkit.RequireFile(t, filepath.Join(frrDaemons, "zebra"), "FRR is not installed: scripts/setup.sh installs frr")
			}
			oldD, oldE := frrDaemons, hostEtc
			frrDaemons, hostEtc = tc.daemons, tc.etc
			defer func() { frrDaemons, hostEtc = oldD, oldE }()
			c := &collection{files: map[string]*entry{}}
			if err := c.frr(); !errors.Is(err, ErrNoFRR) {
				t.Errorf("frr() = %v, want %v", err, ErrNoFRR)
			}
		})
	}
}

// TestPAM reads a PAM service's lines: modules after a plain or a bracketed control, with a
// "-" before the type, and in the files it includes; a module the host lacks is an error.
func TestPAM(t *testing.T) {
	testkit.RequireFile(t, filepath.Join(pamModules, "pam_permit.so"), "no PAM modules: apt-get install libpam-modules")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("common", "account required pam_permit.so\n")
	cases := []struct {
		name, body string
		want       []string // modules, nil: an error
	}{
		{"plain", "# comment\nauth sufficient pam_permit.so\n", []string{"pam_permit.so"}},
		{"bracketed and included", "auth [success=1 default=ignore] pam_deny.so nullok\n-session optional pam_rootok.so\n@include common\n",
			[]string{"pam_deny.so", "pam_rootok.so", "pam_permit.so"}},
		{"missing module", "auth required pam_nope_trellis.so\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &collection{files: map[string]*entry{}}
			err := c.pam(write("svc-"+strings.ReplaceAll(tc.name, " ", "-"), tc.body))
			if tc.want == nil {
				if err == nil {
					t.Error("no error for a missing module")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.want {
				if c.files[filepath.Join(pamModules, m)] == nil {
					t.Errorf("no module %s", m)
				}
			}
		})
	}
}

// TestLoadFRR tells an image with FRR by its inputs.
func TestLoadFRR(t *testing.T) {
	cases := []struct {
		inputs string
		want   bool
	}{
		{`["/usr/bin/ip 0123456789ab", "/usr/bin/vtysh 0123456789ab"]`, true},
		{`["/usr/bin/ip 0123456789ab", "/usr/sbin/bird 0123456789ab"]`, false},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "image.json"), []byte(`{"ID": "x", "Inputs": `+c.inputs+`}`), 0o644); err != nil {
			t.Fatal(err)
		}
		img, err := load(dir)
		if err != nil || img.FRR != c.want {
			t.Errorf("inputs %s: FRR %v, %v; want %v", c.inputs, img.FRR, err, c.want)
		}
	}
}

// An image takes the files of /etc/frr that are as the package installed them, and leaves out
// those the host's administrator changed or wrote (they may hold the host's secrets).
func TestFRRPackagedEtc(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"daemons": "stock daemons", "frr.conf": "password secret", "extra.conf": "secret"}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	sum := func(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }
	status := fmt.Sprintf("Conffiles:\n %s/daemons %s\n %s/frr.conf %s\n", dir, sum("stock daemons"), dir, sum("stock frr.conf"))
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	oldE, oldS, oldU := frrEtc, pkgfiles.DpkgStatus, pkgfiles.UCFHashes
	frrEtc, pkgfiles.DpkgStatus, pkgfiles.UCFHashes = dir, filepath.Join(dir, "status"), filepath.Join(dir, "none")
	defer func() { frrEtc, pkgfiles.DpkgStatus, pkgfiles.UCFHashes = oldE, oldS, oldU }()
	c := &collection{files: map[string]*entry{}}
	if err := c.packagedEtc(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"daemons": true, "frr.conf": false, "extra.conf": false} {
		e := c.files[filepath.Join(dir, name)]
		if (e != nil) != want {
			t.Errorf("%s in the image: %v, want %v", name, e != nil, want)
		}
		if e != nil && (e.content != files[name] || e.mode != 0o640) {
			t.Errorf("%s: %q mode %v, want %q 0640", name, e.content, e.mode, files[name])
		}
	}
	if e := c.files[dir]; e == nil || !e.dir {
		t.Errorf("the directory: %+v, want it in the image", e)
	}
}
