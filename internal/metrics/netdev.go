package metrics

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ifStats are one interface's counters as /proc/PID/net/dev gives them.
type ifStats struct {
	RxBytes, RxFrames, RxDrops uint64
	TxBytes, TxFrames, TxDrops uint64
}

// readNetDev reads the interface counters of the network namespace of process pid, from
// /proc/PID/net/dev: a file read, no namespace to enter.
func readNetDev(pid int) (map[string]ifStats, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return nil, err
	}
	return parseNetDev(data)
}

// parseNetDev parses the content of a /proc/net/dev file.
func parseNetDev(data []byte) (map[string]ifStats, error) {
	out := map[string]ifStats{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 0; sc.Scan(); line++ {
		if line < 2 { // two header lines
			continue
		}
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return nil, fmt.Errorf("net/dev line %d: no colon: %q", line+1, sc.Text())
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("net/dev line %d: %d fields, want 16", line+1, len(f))
		}
		var v [16]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("net/dev line %d: %w", line+1, err)
			}
			v[i] = n
		}
		out[strings.TrimSpace(name)] = ifStats{RxBytes: v[0], RxFrames: v[1], RxDrops: v[3], TxBytes: v[8], TxFrames: v[9], TxDrops: v[11]}
	}
	return out, sc.Err()
}
