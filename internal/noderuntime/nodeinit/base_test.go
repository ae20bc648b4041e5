package nodeinit

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestHiddenMounts(t *testing.T) {
	const info = `22 1 8:1 / / rw - ext4 /dev/root rw
23 22 0:5 / /proc rw - proc proc rw
24 22 0:6 / /sys rw - sysfs sysfs rw
25 24 0:7 / /sys/fs/cgroup rw - tmpfs tmpfs rw
26 25 0:8 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
27 22 0:9 / /dev rw - devtmpfs udev rw
28 27 0:10 / /dev/shm rw - tmpfs tmpfs rw
29 28 0:11 / /dev/shm rw - tmpfs tmpfs rw
30 27 0:12 / /dev/pts-x rw - devpts devpts rw
31 22 0:13 / /run rw - tmpfs tmpfs rw
32 31 8:1 /run/netns /run/netns rw shared:5 - ext4 /dev/root rw
33 32 0:4 net:[1] /run/netns/a rw shared:5 - nsfs nsfs rw
34 31 0:14 / /run/user/1000 rw - tmpfs tmpfs rw
35 22 0:15 / /srv/a\040b rw - tmpfs tmpfs rw
36 22 0:16 / /var/lib/images rw - tmpfs tmpfs rw
37 22 0:17 / /devices rw - tmpfs tmpfs rw
`
	path := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(path, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := hiddenMounts(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/dev/shm", "/dev/pts-x", "/run/netns", "/sys/fs/cgroup"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("hiddenMounts = %q, want %q", got, want)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`/srv/a\040b`, "/srv/a b"}, {`/a\134b`, `/a\b`}, {`/plain`, "/plain"}, {`/end\04`, `/end\04`},
	} {
		if got := unescapeMountinfo(c.in); got != c.want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
