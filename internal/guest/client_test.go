package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// fakeAgent answers requests on a unix socket as the agent would, after first sending an
// answer to a request nobody made (left over from an earlier client).
func fakeAgent(t *testing.T, handle func(*Request) Response) string {
	path := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		enc := json.NewEncoder(conn)
		enc.Encode(Response{ID: 1, Stdout: "stale"})
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			var req Request
			if json.Unmarshal(sc.Bytes(), &req) != nil {
				continue
			}
			resp := handle(&req)
			resp.ID = req.ID
			enc.Encode(resp)
		}
	}()
	return path
}

func TestClient(t *testing.T) {
	path := fakeAgent(t, func(r *Request) Response {
		switch r.Op {
		case "ping":
			return Response{}
		case "exec":
			if r.Argv[0] == "false" {
				return Response{Exit: 1}
			}
			return Response{Stdout: r.Stdin}
		}
		return Response{Error: "unknown op " + r.Op}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Do(ctx, &Request{Op: "exec", Argv: []string{"cat"}, Stdin: "hello"})
	if err != nil || r.Stdout != "hello" {
		t.Errorf("exec cat = %+v, %v; want hello", r, err)
	}
	if r, err := c.Do(ctx, &Request{Op: "exec", Argv: []string{"false"}}); err != nil || r.Exit != 1 {
		t.Errorf("exec false = %+v, %v; want exit 1 and no error", r, err)
	}
	if _, err := c.Do(ctx, &Request{Op: "nope"}); !errors.Is(err, ErrAgent) {
		t.Errorf("an op the agent refuses: %v, want ErrAgent", err)
	}
}

func TestDialGivesUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "silent.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // accepts, never answers: a guest still booting
		conn, err := l.Accept()
		if err == nil {
			defer conn.Close()
			time.Sleep(5 * time.Second)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := Dial(ctx, path); !errors.Is(err, ErrAgent) {
		t.Errorf("Dial of a silent agent: %v, want ErrAgent after the deadline", err)
	}
}
