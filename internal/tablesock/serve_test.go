package tablesock

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/dataplane"
)

// fake is a program with one table of 4-byte keys and values.
type fake struct{ table map[string]string }

func (f *fake) Do(r dataplane.TableRequest) (*dataplane.TableReply, error) {
	if r.Table == "panic" {
		panic("boom")
	}
	if r.Op == dataplane.OpSet {
		f.table[r.Key] = r.Value
		return &dataplane.TableReply{}, nil
	}
	return &dataplane.TableReply{Value: f.table[r.Key]}, nil
}

func (f *fake) Close() {}

// serveFake serves a fake program on a unix socket of a temporary directory, to peers of uid.
func serveFake(t *testing.T, uid uint32) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fake{table: map[string]string{}}
	s := &server{uid: uid, open: func() (program, error) { return f, nil }, slots: make(chan struct{}, maxConns)}
	go s.serve(ln)
	return path
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, path string) *client {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{c, bufio.NewReader(c)}
}

// ask sends line and returns the answer.
func (c *client) ask(t *testing.T, line string) Reply {
	t.Helper()
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("sending %.40q: %v", line, err)
	}
	return c.read(t)
}

func (c *client) read(t *testing.T) Reply {
	t.Helper()
	data, err := c.r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	var r Reply
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("answer %q: %v", data, err)
	}
	return r
}

func TestServe(t *testing.T) {
	path := serveFake(t, uint32(os.Getuid()))
	c := dial(t, path)
	for _, tc := range []struct{ req, err, value string }{
		{`{"op":"set","table":"t","key":"01","value":"02"}`, "", ""},
		{`{"op":"get","table":"t","key":"01"}`, "", "02"},
		{`not json`, "not a request", ""},
		{`{"op":"get","tabel":"t"}`, `unknown field "tabel"`, ""},
		{`{"op":"get","table":"panic"}`, "internal error: boom", ""},
	} {
		if tc.err == "internal error: boom" {
			c = dial(t, path) // a request the server fails on ends its connection
		}
		r := c.ask(t, tc.req)
		if r.TableReply == nil {
			r.TableReply = &dataplane.TableReply{}
		}
		if tc.err == "" && (!r.OK || r.Value != tc.value) || tc.err != "" && (r.OK || !strings.Contains(r.Error, tc.err)) {
			t.Errorf("%s: %+v, want value %q, error %q", tc.req, r, tc.value, tc.err)
		}
	}
	// After all that, the server still serves.
	if r := dial(t, path).ask(t, `{"op":"get","table":"t","key":"01"}`); r.Value != "02" {
		t.Errorf("after the bad requests: %+v", r)
	}
}

// TestServeLimits: a request longer than maxLine gets an error and its connection is closed;
// connections beyond maxConns get an error; the server serves the others and new ones after.
func TestServeLimits(t *testing.T) {
	path := serveFake(t, uint32(os.Getuid()))
	c := dial(t, path)
	go c.c.Write([]byte(strings.Repeat("x", 3*maxLine))) // may fail once the server closes
	if r := c.read(t); r.OK || !strings.Contains(r.Error, "longer than") {
		t.Errorf("a 3 MiB request: %+v, want an error", r)
	}
	c.c.Close()
	var held []*client
	for range maxConns {
		held = append(held, dialServed(t, path, fmt.Sprintf("connection %d of %d", len(held)+1, maxConns)))
	}
	if r := dial(t, path).read(t); r.OK || !strings.Contains(r.Error, "too many connections") {
		t.Errorf("connection %d: %+v, want it refused", maxConns+1, r)
	}
	held[0].c.Close()
	dialServed(t, path, "a connection once one closed")
}

// dialServed dials the server until a request is served. The slot of a connection closed (by
// the server or the test) is given back by its goroutine a moment later, so a refusal for too
// many connections is retried until then, never past 2 s.
func dialServed(t *testing.T, path, what string) *client {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h := dial(t, path)
		r := h.ask(t, `{"op":"get","table":"t"}`)
		if r.OK {
			return h
		}
		h.c.Close()
		if !strings.Contains(r.Error, "too many connections") || time.Now().After(deadline) {
			t.Fatalf("%s: %+v", what, r)
		}
	}
}

// TestServeRootOnly: a peer of another uid than the node's root gets an error for each request.
func TestServeRootOnly(t *testing.T) {
	c := dial(t, serveFake(t, uint32(os.Getuid())+12345))
	for range 2 {
		if r := c.ask(t, `{"op":"set","table":"t","key":"01","value":"02"}`); r.OK || !strings.Contains(r.Error, "root (uid 0) only") {
			t.Errorf("another uid: %+v, want it refused", r)
		}
	}
}
