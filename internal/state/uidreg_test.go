package state

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/trellisnet/trellis/internal/testkit"
)

// allocMany allocates a range for networks net0..net(n-1) of store st, in parallel, and
// returns the bases.
func allocMany(st *Store, n int) ([]uint32, error) {
	out := make([]uint32, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out[i], errs[i] = st.AllocUIDs(fmt.Sprintf("net%d", i), func() (map[uint32]bool, error) { return map[uint32]bool{}, nil })
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TestUIDAllocHelper is the other process of TestUIDRangesAcrossProcesses: it allocates
// ranges in the state directory UIDALLOC_DIR and prints them.
func TestUIDAllocHelper(t *testing.T) {
	dir := os.Getenv("UIDALLOC_DIR")
	if dir == "" {
		testkit.Skip(t, "run by TestUIDRangesAcrossProcesses")
	}
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(os.Getenv("UIDALLOC_N"))
	bases, err := allocMany(st, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bases {
		fmt.Println("base", b)
	}
}

// Two processes with two state directories allocating at the same moment never get the same
// range; a network that is down keeps nothing, and its range goes to the next allocation.
func TestUIDRangesAcrossProcesses(t *testing.T) {
	const n = 24
	t.Setenv("TRELLIS_UID_REGISTRY", t.TempDir())
	t.Setenv("TRELLIS_UID_BASE", "65536")
	t.Setenv("TRELLIS_UID_RANGES", strconv.Itoa(2*n))
	other := exec.Command(os.Args[0], "-test.run=^TestUIDAllocHelper$", "-test.v")
	other.Env = append(os.Environ(), "UIDALLOC_DIR="+t.TempDir(), "UIDALLOC_N="+strconv.Itoa(n))
	out, err := other.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mine, err := allocMany(st, n)
	if err != nil {
		t.Fatal(err)
	}
	var theirs []uint32
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if b, ok := strings.CutPrefix(sc.Text(), "base "); ok {
			v, _ := strconv.ParseUint(b, 10, 32)
			theirs = append(theirs, uint32(v))
		}
	}
	if err := other.Wait(); err != nil {
		t.Fatalf("the other process: %v", err)
	}
	if len(theirs) != n {
		t.Fatalf("the other process allocated %d ranges, want %d", len(theirs), n)
	}
	seen := map[uint32]string{}
	for i, b := range append(mine, theirs...) {
		who := fmt.Sprintf("process %d net%d", i/n, i%n)
		if prev, dup := seen[b]; dup {
			t.Fatalf("range %d given to %s and %s", b, prev, who)
		}
		seen[b] = who
	}
	// Every range is taken: the next allocation fails until a network is deleted.
	if _, err := st.AllocUIDs("extra", func() (map[uint32]bool, error) { return map[uint32]bool{}, nil }); err == nil {
		t.Fatal("an allocation beyond the last range succeeded")
	}
	if err := st.Delete("net3"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(UIDRegistryDir(), strconv.Itoa(int(mine[3])))); !os.IsNotExist(err) {
		t.Fatalf("the registry still holds the deleted network's range: %v", err)
	}
	got, err := st.AllocUIDs("extra", func() (map[uint32]bool, error) { return map[uint32]bool{}, nil })
	if err != nil || got != mine[3] {
		t.Fatalf("after down: AllocUIDs = %d, %v; want the freed range %d", got, err, mine[3])
	}
}

// An entry whose state directory no longer records its range (its record was lost) is taken
// again; one whose state directory records it is not, whatever runs.
func TestUIDRegistryStaleEntries(t *testing.T) {
	t.Setenv("TRELLIS_UID_REGISTRY", t.TempDir())
	t.Setenv("TRELLIS_UID_BASE", "65536")
	t.Setenv("TRELLIS_UID_RANGES", "2")
	a, _ := Open(t.TempDir())
	b, _ := Open(t.TempDir())
	none := func() (map[uint32]bool, error) { return map[uint32]bool{}, nil }
	steps := []struct {
		st   *Store
		name string
		lose bool // remove the network's uid record by hand instead of allocating
		want uint32
	}{
		{st: a, name: "x", want: 65536},
		{st: b, name: "y", want: 2 * 65536},
		{st: a, name: "x", lose: true},
		{st: b, name: "z", want: 65536}, // x's entry is stale now
	}
	for i, s := range steps {
		if s.lose {
			if err := os.Remove(s.st.uidPath(s.name)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := s.st.AllocUIDs(s.name, none)
		if err != nil || got != s.want {
			t.Errorf("step %d: AllocUIDs(%s) = %d, %v; want %d", i, s.name, got, err, s.want)
		}
	}
}
