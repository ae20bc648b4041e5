package oci

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLookupUser(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\nfrr:x:100:101::/var/run/frr:/bin/false\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\nfrrvty:x:102:frr\n"), 0o644)
	cases := []struct{ user, want, err string }{
		{"frr", "100:101", ""},
		{"frr:frrvty", "100:102", ""},
		{"100", "100:101", ""},
		{"5000", "5000:0", ""},
		{"5000:7", "5000:7", ""},
		{"nobody", "", "no user nobody in the image's /etc/passwd"},
		{"frr:wheel", "", "no group wheel in the image's /etc/group"},
	}
	for _, c := range cases {
		got, err := lookupUser(root, c.user)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("lookupUser(%q) = %q, %v; want %q, %q", c.user, got, err, c.want, c.err)
		}
	}
}
