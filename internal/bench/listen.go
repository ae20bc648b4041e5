package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// tcpListen is the state number of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// waitListening waits until a TCP socket listens on port in the network namespace of pid (a
// server started in a node reaches listen some time after it starts, later on a loaded machine).
func waitListening(ctx context.Context, pid, port int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		for _, f := range []string{"tcp", "tcp6"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
			if err == nil && listensOn(b, port) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on TCP port %d after %v", port, timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// listensOn reports whether a /proc/net/tcp or tcp6 table holds a listening socket on port.
func listensOn(table []byte, port int) bool {
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpListen {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		if p, err := strconv.ParseUint(f[1][i+1:], 16, 16); err == nil && int(p) == port {
			return true
		}
	}
	return false
}
