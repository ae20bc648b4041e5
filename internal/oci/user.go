package oci

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// lookupUser turns an image config's User (USER, USER:GROUP, UID or UID:GID) into UID:GID,
// names looked up in the image's /etc/passwd and /etc/group as a container runtime does: a
// user without a group gets its passwd entry's group (0 for a bare UID not in passwd).
func lookupUser(root, user string) (string, error) {
	u, g, hasGroup := strings.Cut(user, ":")
	uid, gid := -1, 0
	if n, err := strconv.Atoi(u); err == nil {
		uid = n
	}
	for _, f := range readDB(filepath.Join(root, "etc/passwd")) {
		if len(f) > 3 && (f[0] == u || f[2] == u) {
			uid, _ = strconv.Atoi(f[2])
			gid, _ = strconv.Atoi(f[3])
			break
		}
	}
	if uid < 0 {
		return "", fmt.Errorf("no user %s in the image's /etc/passwd", u)
	}
	if hasGroup {
		gid = -1
		if n, err := strconv.Atoi(g); err == nil {
			gid = n
		}
		for _, f := range readDB(filepath.Join(root, "etc/group")) {
			if len(f) > 2 && f[0] == g {
				gid, _ = strconv.Atoi(f[2])
			}
		}
		if gid < 0 {
			return "", fmt.Errorf("no group %s in the image's /etc/group", g)
		}
	}
	return fmt.Sprintf("%d:%d", uid, gid), nil
}

// readDB reads a colon-separated database (passwd, group); a missing file has no entries,
// and so has one that is, or is in, a symbolic link (the image's, which could point at the
// host's files).
func readDB(path string) [][]string {
	for _, p := range []string{filepath.Dir(path), path} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return nil
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, strings.Split(line, ":"))
		}
	}
	return out
}
