package nodeinit

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// writeFiles writes the topology's files into the node (after its /etc is mounted, so that
// owners are looked up in the node's own /etc/passwd and /etc/group). Missing parent
// directories are made with mode 0755; existing ones keep their owners and modes.
func writeFiles(files []File) error {
	for _, f := range files {
		if err := writeFile(f); err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
	}
	return nil
}

func writeFile(f File) error {
	uid, gid, err := lookupOwner(f.Owner)
	if err != nil {
		return err
	}
	mode := os.FileMode(f.Mode)
	if mode == 0 {
		mode = 0o644
	}
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(f.Path, []byte(f.Content), 0o600); err != nil {
		return err
	}
	if err := os.Chown(f.Path, uid, gid); err != nil {
		return err
	}
	return os.Chmod(f.Path, mode) // after chown, which clears set-id bits
}

// lookupOwner resolves "USER" or "USER:GROUP" (names or numbers) to ids; "" is root. A user
// without a group gets the user's primary group.
func lookupOwner(owner string) (uid, gid int, err error) {
	if owner == "" {
		return 0, 0, nil
	}
	user, group, hasGroup := strings.Cut(owner, ":")
	uid, primary, err := lookupID("/etc/passwd", user, "user")
	if err != nil {
		return 0, 0, err
	}
	if !hasGroup {
		return uid, primary, nil
	}
	gid, _, err = lookupID("/etc/group", group, "group")
	return uid, gid, err
}

// lookupID finds name (or a number) in a passwd or group file; it returns the id and, for
// passwd, the primary group.
func lookupID(file, name, what string) (id, group int, err error) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, n, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 4 || fields[0] != name {
			continue
		}
		id, err1 := strconv.Atoi(fields[2])
		group, err2 := strconv.Atoi(fields[3])
		if err1 != nil || (err2 != nil && what == "user") {
			return 0, 0, fmt.Errorf("%s: bad entry for %s", file, name)
		}
		return id, group, nil
	}
	return 0, 0, fmt.Errorf("no %s %q in the node's %s: install the software that makes it on the host, or give a number", what, name, file)
}

// WriteFile writes one file as writeFiles does, its owner looked up in this system's /etc: the
// agent of a VM node's guest (internal/guest) writes the node's files with it.
func WriteFile(f File) error { return writeFile(f) }
