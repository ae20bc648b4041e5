package vm

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/node"
)

// findQEMU finds the QEMU processes of network netID of state stateID by their guest names:
// by node, normally one (two only if something went wrong; Stop ends them all).
func findQEMU(stateID, netID string) (map[string][]kinds.Instance, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return nil, err
	}
	prefix := "guest=" + markerPrefix + stateID + "/" + netID + "/"
	out := map[string][]kinds.Instance{}
	for _, d := range dirs {
		data, err := os.ReadFile(d)
		if err != nil || !bytes.Contains(data, []byte(prefix)) {
			continue
		}
		argv := strings.Split(string(data), "\x00")
		if filepath.Base(argv[0]) != QEMU {
			continue
		}
		for _, arg := range argv {
			rest, ok := strings.CutPrefix(arg, prefix)
			if !ok {
				continue
			}
			rest, _, _ = strings.Cut(rest, ",")
			name, digest, ok := strings.Cut(rest, "/")
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			if ok && err == nil && !node.Gone(pid) {
				out[name] = append(out[name], kinds.Instance{Kind: Name, Name: name, PID: pid, Digest: digest})
			}
		}
	}
	return out, nil
}
