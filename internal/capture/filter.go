package capture

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

// ErrNoTcpdump is returned for a filter expression when tcpdump, which compiles it, is missing.
var ErrNoTcpdump = errors.New("compiling a filter expression needs tcpdump (apt-get install tcpdump)")

// CompileFilter compiles a pcap filter expression (tcpdump's syntax, e.g. "icmp or arp") for
// Ethernet frames into classic BPF. The binary has no libpcap: the expression is compiled by
// `tcpdump -ddd`, so it means exactly what it means to tcpdump. It is given after "--", as
// tcpdump's expression and never as its options: the expression comes from the caller of the
// CLI or the API, and tcpdump runs as root (`-F/etc/shadow` would read that file).
func CompileFilter(expr string, snaplen int) ([]bpf.RawInstruction, error) {
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		return nil, ErrNoTcpdump
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(tcpdump, "-ddd", "-y", "EN10MB", "-s", strconv.Itoa(snaplen), "--", expr)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(strings.ReplaceAll(errOut.String(), "Warning: assuming Ethernet", ""))
		if strings.HasPrefix(expr, "-") {
			msg += " (a filter is a pcap expression, e.g. \"icmp or arp\"; it takes no tcpdump options)"
		}
		return nil, fmt.Errorf("filter %q: %s", expr, strings.TrimPrefix(msg, "tcpdump: "))
	}
	return parseDDD(out.String())
}

// parseDDD reads `tcpdump -ddd` output: the count, then one "code jt jf k" line per instruction.
func parseDDD(text string) ([]bpf.RawInstruction, error) {
	lines := strings.Fields(strings.ReplaceAll(text, "\n", " \n "))
	var nums []uint64
	for _, f := range lines {
		v, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("filter: tcpdump -ddd printed %q: %w", f, err)
		}
		nums = append(nums, v)
	}
	if len(nums) == 0 || uint64(len(nums)-1) != 4*nums[0] {
		return nil, fmt.Errorf("filter: tcpdump -ddd printed %d numbers, want a count and 4 per instruction", len(nums))
	}
	out := make([]bpf.RawInstruction, nums[0])
	for i := range out {
		v := nums[1+4*i:]
		out[i] = bpf.RawInstruction{Op: uint16(v[0]), Jt: uint8(v[1]), Jf: uint8(v[2]), K: uint32(v[3])}
	}
	return out, nil
}
