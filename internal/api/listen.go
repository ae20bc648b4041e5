package api

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// ErrNotLoopback is returned for a listen address other than the loopback.
var ErrNotLoopback = errors.New("only loopback addresses (127.0.0.1, [::1], localhost) can be served for now: TLS and tenant credentials, which serving other addresses needs, come with the cluster")

// ListenUnix listens on the unix socket path, which only its owner (root) may use (mode
// 0600). A socket file left by a server that is gone is replaced; one that a live server
// answers on is an error.
func ListenUnix(path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("serve: %s: another trellis serve is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("serve: removing the stale socket: %w", err)
		}
	}
	old := syscall.Umask(0o177) // the socket is made 0600, with no moment of a wider mode
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return l, nil
}

// ListenLoopback listens on the TCP address addr (HOST:PORT), whose host must be a loopback
// address or localhost.
func ListenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("serve: --listen %q: %w; write HOST:PORT, e.g. 127.0.0.1:8080", addr, err)
	}
	if host != "localhost" {
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("serve: --listen %s: %w", addr, ErrNotLoopback)
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return l, nil
}

func fprintf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format, args...) }
