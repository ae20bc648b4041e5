// Package pkgfiles tells which files of /etc are as the packages installed them: dpkg records
// the MD5 of every conffile a package installs, and ucf of the files it manages for packages
// (e.g. bird2's /etc/bird/bird.conf). Such a file's contents are its package's, which anyone may
// download: trellis gives them to nodes even where the host keeps them from other users
// (/etc/frr/daemons, 0640 frr:frr), and leaves out the files an administrator changed.
package pkgfiles

import (
	"bufio"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Where dpkg and ucf record the sums: variables, for tests.
var (
	DpkgStatus = "/var/lib/dpkg/status"
	UCFHashes  = "/var/lib/ucf/hashfile"
)

// Sums are the MD5 sums (hex) that dpkg and ucf recorded, by path.
type Sums map[string]string

// Read returns the sums recorded now. A host without dpkg or ucf has none.
func Read() (Sums, error) {
	sums := Sums{}
	if err := readSums(DpkgStatus, sums, conffileLine); err != nil {
		return nil, err
	}
	if err := readSums(UCFHashes, sums, ucfLine); err != nil {
		return nil, err
	}
	return sums, nil
}

// Unchanged says whether data, the contents of the file at path, are as its package installed
// them.
func (s Sums) Unchanged(path string, data []byte) bool {
	want, ok := s[path]
	sum := md5.Sum(data)
	return ok && hex.EncodeToString(sum[:]) == want
}

func readSums(file string, sums Sums, parse func(line string, in *bool) (path, sum string)) error {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("packages' files: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	in := false
	for sc.Scan() {
		if path, sum := parse(sc.Text(), &in); path != "" && isMD5(sum) {
			sums[path] = strings.ToLower(sum)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("packages' files: %s: %w", file, err)
	}
	return nil
}

// conffileLine reads a line of dpkg's status file: a package's "Conffiles:" field is followed
// by lines " PATH MD5" (then " obsolete" or " remove-on-upgrade" for some); in says whether
// the line is in that field.
func conffileLine(line string, in *bool) (path, sum string) {
	if !strings.HasPrefix(line, " ") {
		*in = line == "Conffiles:"
		return "", ""
	}
	if !*in {
		return "", ""
	}
	line = strings.TrimSpace(line)
	for _, flag := range []string{" obsolete", " remove-on-upgrade"} {
		line = strings.TrimSuffix(line, flag)
	}
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", ""
	}
	return line[:i], line[i+1:]
}

// ucfLine reads a line of ucf's hashfile: "MD5  PATH".
func ucfLine(line string, _ *bool) (path, sum string) {
	sum, path, _ = strings.Cut(line, " ")
	return strings.TrimSpace(path), sum
}

func isMD5(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 16
}
