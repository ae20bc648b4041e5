package dataplane

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNetkitIn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		btfFile bool   // /sys/kernel/btf/netkit exists
		module  string // module file under kernel/drivers/net, "" for none
		typ     bool   // struct netkit in vmlinux BTF
		typErr  error
		want    bool
		say     string
	}{
		{"nothing", false, "", false, nil, false, "no netkit in this kernel"},
		{"module loaded", true, "", false, nil, true, "module loaded"},
		{"built in", false, "", true, nil, true, "built into the kernel"},
		{"module on disk", false, "netkit.ko.zst", false, nil, true, "module available"},
		{"no BTF", false, "", false, errors.New("no btf"), false, "cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			btfDir, modules := filepath.Join(dir, "btf"), filepath.Join(dir, "modules")
			for _, d := range []string{btfDir, filepath.Join(modules, "kernel", "drivers", "net")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.btfFile {
				os.WriteFile(filepath.Join(btfDir, "netkit"), nil, 0o644)
			}
			if tc.module != "" {
				os.WriteFile(filepath.Join(modules, "kernel", "drivers", "net", tc.module), nil, 0o644)
			}
			got, say := netkitIn(btfDir, modules, func(name string) (bool, error) {
				if name != "netkit" {
					t.Errorf("looked up type %q", name)
				}
				return tc.typ, tc.typErr
			})
			if got != tc.want || !strings.Contains(say, tc.say) {
				t.Fatalf("netkitIn = %v, %q; want %v, containing %q", got, say, tc.want, tc.say)
			}
		})
	}
}
