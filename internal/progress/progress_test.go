package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestBar(t *testing.T) {
	cases := []struct {
		step        string
		done, total int
		width       int
		want        string
	}{
		{"nodes started", 0, 10, 80, "nodes started [........................................] 0/10"},
		{"nodes started", 5, 10, 80, "nodes started [####################....................] 5/10"},
		{"links", 10, 10, 30, "links [################] 10/10"},
		{"links", 12, 10, 30, "links [################] 12/10"},
		{"links", 3, 10, 12, "links 3/10"},
		{"links", 0, 0, 80, "links 0/0"},
	}
	for _, c := range cases {
		if got := Bar(c.step, c.done, c.total, c.width); got != c.want {
			t.Errorf("Bar(%q, %d, %d, %d) = %q, want %q", c.step, c.done, c.total, c.width, got, c.want)
		}
	}
}

// TestTerminal: log lines go above the status line, which is cleared before each and drawn
// again after; Close leaves no status behind.
func TestTerminal(t *testing.T) {
	var out bytes.Buffer
	tm := newTerminal(&out, &out, 60)
	tm.Progress("nodes started", 3, 10)
	tm.Write([]byte("3 nodes started in 0.1s\n"))
	tm.Close()
	text := out.String()
	if !strings.HasPrefix(text, "\r\x1b[Knodes started [") || !strings.Contains(text, "] 3/10  0.0s") {
		t.Fatalf("status line not drawn first: %q", text)
	}
	i := strings.Index(text, "3 nodes started in 0.1s\n")
	if i < 0 || !strings.HasSuffix(text[:i], "\r\x1b[K") {
		t.Errorf("log line not printed on a cleared line: %q", text)
	}
	if !strings.HasSuffix(text, "\r\x1b[K") {
		t.Errorf("Close did not clear the status line: %q", text)
	}
}

// TestShown: nothing is drawn into files and pipes, or in CI.
func TestShown(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	for _, x := range []any{f, w, &bytes.Buffer{}} {
		if Shown(x.(interface{ Write([]byte) (int, error) })) {
			t.Errorf("%T: progress shown", x)
		}
	}
	if New(f, f) != nil {
		t.Errorf("New on a file is not nil")
	}
}
