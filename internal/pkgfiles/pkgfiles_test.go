package pkgfiles

import (
	"os"
	"testing"
)

func TestConffileLine(t *testing.T) {
	cases := []struct{ line, path, sum string }{
		{" /etc/frr/daemons 7595bf34d8e42c9228e1ca3a7e471294", "/etc/frr/daemons", "7595bf34d8e42c9228e1ca3a7e471294"},
		{" /etc/old.conf 7595bf34d8e42c9228e1ca3a7e471294 obsolete", "/etc/old.conf", "7595bf34d8e42c9228e1ca3a7e471294"},
		{" /etc/a b.conf 7595bf34d8e42c9228e1ca3a7e471294 remove-on-upgrade", "/etc/a b.conf", "7595bf34d8e42c9228e1ca3a7e471294"},
		{" /etc/new.conf newconffile", "/etc/new.conf", "newconffile"},
	}
	for _, c := range cases {
		in := true
		if path, sum := conffileLine(c.line, &in); path != c.path || sum != c.sum {
			t.Errorf("%q: %q %q, want %q %q", c.line, path, sum, c.path, c.sum)
		}
	}
	in := true
	if path, _ := conffileLine("Description: a", &in); path != "" || in {
		t.Errorf("a field after Conffiles: path %q, in %v; want none and out of it", path, in)
	}
	if path, _ := conffileLine(" /etc/x 7595bf34d8e42c9228e1ca3a7e471294", &in); path != "" {
		t.Errorf("a continuation line of another field was read as a conffile: %q", path)
	}
}

// Read takes dpkg's conffiles and ucf's hashes; Unchanged compares a file's contents with them.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	DpkgStatus, UCFHashes = dir+"/status", dir+"/hashfile"
	defer func() { DpkgStatus, UCFHashes = "/var/lib/dpkg/status", "/var/lib/ucf/hashfile" }()
	status := "Package: a\nConffiles:\n /etc/a.conf 900150983cd24fb0d6963f7d28e17f72\nDescription: d\n /etc/b.conf 900150983cd24fb0d6963f7d28e17f72\n"
	hashes := "900150983CD24FB0D6963F7D28E17F72  /etc/bird/bird.conf\n"
	for file, data := range map[string]string{DpkgStatus: status, UCFHashes: hashes} {
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sums, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, contents string
		want           bool
	}{
		{"/etc/a.conf", "abc", true}, // md5("abc")
		{"/etc/a.conf", "abcd", false},
		{"/etc/b.conf", "abc", false}, // a line of Description, not a conffile
		{"/etc/bird/bird.conf", "abc", true},
		{"/etc/other", "abc", false},
	}
	for _, c := range cases {
		if got := sums.Unchanged(c.path, []byte(c.contents)); got != c.want {
			t.Errorf("%s holding %q: unchanged = %v, want %v", c.path, c.contents, got, c.want)
		}
	}
	os.Remove(DpkgStatus)
	os.Remove(UCFHashes)
	if sums, err := Read(); err != nil || len(sums) != 0 {
		t.Errorf("a host without dpkg or ucf: %v, %v; want no sums", sums, err)
	}
}
