package marked

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/noderuntime"
)

var errTest = errors.New("test helper")

// sleeperEnv makes this test binary a helper that only sleeps, whatever its command line.
const sleeperEnv = "MARKED_TEST_SLEEPER"

func TestMain(m *testing.M) {
	if os.Getenv(sleeperEnv) == "1" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A helper's marker carries its key and its configuration's digest; the digest changes with
// the configuration and nothing else.
func TestMarker(t *testing.T) {
	k := Kind{Arg0: "trellis-test-helper", Err: errTest}
	type conf struct{ A, B int }
	m := k.Marker("st", "n1", "eth1", conf{1, 2})
	if len(m) != 5 || m[0] != k.Arg0 || m[1] != "st" || m[2] != "n1" || m[3] != "eth1" || m[4] != Digest(conf{1, 2}) {
		t.Fatalf("marker %q", m)
	}
	if Digest(conf{1, 2}) != Digest(conf{1, 2}) || Digest(conf{1, 2}) == Digest(conf{2, 1}) {
		t.Error("the digest does not follow the configuration")
	}
}

// Find finds a process running under a kind's marker, KillExcept spares the keys kept and
// ends the others, and Kill of a process already gone is no error.
func TestFindKillExcept(t *testing.T) {
	k := Kind{Arg0: "trellis-test-helper", Err: errTest}
	start := func(key string) *exec.Cmd {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self)
		cmd.Args = k.Marker("st", "n1", key, key)
		cmd.Env = append(os.Environ(), sleeperEnv+"=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		go cmd.Wait() // reap it once killed
		return cmd
	}
	a, b := start("a"), start("b")
	var found map[string]int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m, err := k.Find("st", "n1")
		if err != nil {
			t.Fatal(err)
		}
		found = map[string]int{}
		for key, h := range m {
			found[key] = h.PID
		}
		if len(found) == 2 {
			break
		}
	}
	if found["a"] != a.Process.Pid || found["b"] != b.Process.Pid {
		t.Fatalf("found %v, want a=%d b=%d", found, a.Process.Pid, b.Process.Pid)
	}
	if err := k.KillExcept("st", "n1", map[string]bool{"a": true}); err != nil {
		t.Fatal(err)
	}
	if !noderuntime.Gone(b.Process.Pid) {
		t.Error("b still runs after KillExcept kept only a")
	}
	if noderuntime.Gone(a.Process.Pid) {
		t.Error("a, kept, is gone")
	}
	if err := k.Kill(b.Process.Pid); err != nil {
		t.Errorf("killing a helper already gone: %v", err)
	}
}
