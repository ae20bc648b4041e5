package noderuntime

import (
	"os"
	"testing"
)

// A process of trellis's own PID namespace may be a helper, never a node's init.
func TestStartedHere(t *testing.T) {
	for _, c := range []struct {
		arg0 string
		want bool
	}{{InitArg0, false}, {"trellis-engines", true}} {
		if got := startedHere(c.arg0, os.Getpid()); got != c.want {
			t.Errorf("startedHere(%q, own pid) = %v, want %v", c.arg0, got, c.want)
		}
	}
	if isInit(os.Getpid()) {
		t.Error("this test process was taken for a node's init")
	}
}

func TestJoinOptions(t *testing.T) {
	cases := []struct {
		opts []string
		ok   bool
	}{
		{nil, true},
		{[]string{"-d", "-u", "1000:1000", "-w", "/work"}, true},
		{[]string{"-u"}, false},
		{[]string{"-x"}, false},
		{[]string{"-w", "/a", "extra"}, false},
	}
	for _, c := range cases {
		if got := joinOptions(c.opts); got != c.ok {
			t.Errorf("joinOptions(%q) = %v, want %v", c.opts, got, c.ok)
		}
	}
}
