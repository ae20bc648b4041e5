package testkit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
)

// ErrAllowList is wrapped by every error in the allow-list of skips in CI.
var ErrAllowList = errors.New("allow-list of skips in CI")

// ReadAllowList reads the allow-list file at path (see ParseAllowList).
func ReadAllowList(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAllowList, err)
	}
	defer f.Close()
	return ParseAllowList(path, f)
}

// ParseAllowList parses the allow-list: one test per line, its full name (as t.Name() gives it,
// "TestX" or "TestX/case") then, after white space, the reason CI cannot run it. Blank lines and
// lines starting with # are comments. A line without a reason, a name that is not a test's, or
// a name listed twice is an error naming the file and line.
func ParseAllowList(name string, r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	first := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		test, reason := line, ""
		if i := strings.IndexFunc(line, unicode.IsSpace); i >= 0 {
			test, reason = line[:i], strings.TrimSpace(line[i:])
		}
		switch {
		case !strings.HasPrefix(test, "Test"):
			return nil, fmt.Errorf("%w: %s:%d: %q is not a test's name (TestX or TestX/case): write the test's name, then its reason", ErrAllowList, name, n, test)
		case reason == "":
			return nil, fmt.Errorf("%w: %s:%d: %s has no reason: say after its name why CI cannot run it", ErrAllowList, name, n, test)
		case first[test] != 0:
			return nil, fmt.Errorf("%w: %s:%d: %s is listed already on line %d: keep one line", ErrAllowList, name, n, test, first[test])
		}
		first[test] = n
		out[test] = reason
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrAllowList, name, err)
	}
	return out, nil
}
