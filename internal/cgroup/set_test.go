package cgroup

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// A fresh group is given only the limits whose value is not the kernel's default; a group
// that existed gets every file, a v1 cpuset its parent's cores and memory nodes.
func TestSetWritesOnlyWhatDiffers(t *testing.T) {
	cases := []struct {
		name      string
		v2        bool
		fresh     bool
		inherited bool // the fresh v1 cpuset group has its parent's cores (clone_children)
		l         Limits
		want      map[string]string
	}{
		{name: "v1 fresh, no limits", fresh: true, inherited: true, l: Limits{Pids: 1024},
			want: map[string]string{"pids/pids.max": "1024"}},
		{name: "v1 fresh, cpu and memory", fresh: true, inherited: true, l: Limits{CPUs: 0.5, Memory: 64 << 20, Pids: 100},
			want: map[string]string{"cpu/cpu.cfs_quota_us": "50000", "memory/memory.limit_in_bytes": "67108864", "pids/pids.max": "100"}},
		{name: "v1 fresh, cpuset", fresh: true, inherited: true, l: Limits{Cpuset: "1", Pids: 1024},
			want: map[string]string{"pids/pids.max": "1024", "cpuset/cpuset.cpus": "1"}},
		{name: "v1 fresh, parent without clone_children", fresh: true, l: Limits{Pids: 1024},
			want: map[string]string{"pids/pids.max": "1024", "cpuset/cpuset.cpus": "0-1", "cpuset/cpuset.mems": "0"}},
		{name: "v1 existing", l: Limits{Pids: 1024}, want: map[string]string{
			"cpu/cpu.cfs_period_us": "100000", "cpu/cpu.cfs_quota_us": "-1", "memory/memory.limit_in_bytes": "-1",
			"pids/pids.max": "1024", "cpuset/cpuset.cpus": "0-1", "cpuset/cpuset.mems": "0"}},
		{name: "v2 fresh, no limits", v2: true, fresh: true, l: Limits{Pids: 1024},
			want: map[string]string{"pids.max": "1024"}},
		{name: "v2 existing, cpu", v2: true, l: Limits{CPUs: 1, Pids: 1024}, want: map[string]string{
			"cpu.max": "100000 100000", "memory.max": "max", "pids.max": "1024", "cpuset.cpus": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			h := &Hierarchy{Mounts: map[string]string{}}
			if c.v2 {
				h.V2 = root
			} else {
				for _, ctl := range v1Controllers {
					h.Mounts[ctl] = filepath.Join(root, ctl)
				}
			}
			g := h.Open("n1")
			for _, d := range g.dirs {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if !c.v2 {
				parent := filepath.Dir(g.dirs["cpuset"])
				os.WriteFile(filepath.Join(parent, "cpuset.cpus"), []byte("0-1\n"), 0o644)
				os.WriteFile(filepath.Join(parent, "cpuset.mems"), []byte("0\n"), 0o644)
				if c.inherited {
					os.WriteFile(filepath.Join(g.dirs["cpuset"], "cpuset.mems"), []byte("0\n"), 0o644)
				}
			}
			before := written(t, root)
			if err := g.set(c.l, c.fresh); err != nil {
				t.Fatal(err)
			}
			got := written(t, root)
			for k, v := range before {
				if got[k] == v {
					delete(got, k)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("wrote %v, want %v", keys(got), keys(c.want))
				t.Errorf("values %v, want %v", got, c.want)
			}
		})
	}
}

// written returns the files in the groups (not their parents) under root, by path from the
// controller, and their contents.
func written(t *testing.T, root string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(path)) != "n1" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(rel))), filepath.Base(rel))
		out[filepath.Clean(rel)] = string(data)
		return nil
	})
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
