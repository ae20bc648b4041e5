//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsDial opens the terminal websocket of a node through the server's socket.
func (s *apiServer) wsDial(ctx context.Context, path string) (*websocket.Conn, error) {
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.socket)
	}}}
	c, _, err := websocket.Dial(ctx, "ws://trellis"+path, &websocket.DialOptions{HTTPClient: client})
	return c, err
}

// terminalRun reads a terminal's output until the server's exit message, and returns the
// output and the exit code.
func terminalRun(ctx context.Context, c *websocket.Conn) (string, int, error) {
	var out bytes.Buffer
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return out.String(), -1, fmt.Errorf("%w after output %q", err, out.String())
		}
		if typ == websocket.MessageBinary {
			out.Write(data)
			continue
		}
		var m struct {
			Type string `json:"type"`
			Code int    `json:"code"`
		}
		if err := json.Unmarshal(data, &m); err != nil || m.Type != "exit" {
			return out.String(), -1, fmt.Errorf("text frame %q, want an exit message", data)
		}
		return out.String(), m.Code, nil
	}
}

// readUntil reads a terminal's output until it contains want.
func readUntil(ctx context.Context, c *websocket.Conn, want string) (string, error) {
	var out bytes.Buffer
	for !strings.Contains(out.String(), want) {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return out.String(), fmt.Errorf("waiting for %q: %w; output %q", want, err, out.String())
		}
		if typ == websocket.MessageBinary {
			out.Write(data)
		}
	}
	return out.String(), nil
}

// processWith reports whether a process on the machine has marker in its command line.
func processWith(marker string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
			return true
		}
	}
	return false
}

// TestAPIStreams drives the two streaming operations of `trellis serve`: a terminal into a
// node over a websocket (a command's output and exit code, an interactive shell resized, a
// client that vanishes mid-command, whose command is hung up while the server goes on) and
// capture of a link as a pcapng and a pcap download.
func TestAPIStreams(t *testing.T) {
	e := start(t)
	name := "apis" + nonce()[:4]
	registerNetwork(name)
	s := startServe(t, e.state)
	s.must(201, "POST", "/networks", "application/yaml", fmt.Sprintf(apiTopo, name))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := "/networks/" + name + "/nodes/a/terminal"

	t.Run("command", func(t *testing.T) {
		c, err := s.wsDial(ctx, base+"?"+url.Values{"cmd": {"sh", "-c", "stty size; hostname; exit 3"}, "cols": {"100"}, "rows": {"30"}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		out, code, err := terminalRun(ctx, c)
		if err != nil || code != 3 || !strings.Contains(out, "30 100") || !strings.Contains(out, "a\r\n") {
			t.Errorf("terminal: %v, exit %d, output %q; want exit 3, 30 100 and the node's hostname a", err, code, out)
		}
	})
	t.Run("interactive shell", func(t *testing.T) {
		c, err := s.wsDial(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		c.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","cols":123,"rows":45}`))
		// The typed line echoes as END$((1+1)); the shell's output ends with END2.
		c.Write(ctx, websocket.MessageBinary, []byte("stty size; ip -br addr show eth1; echo END$((1+1))\n"))
		out, err := readUntil(ctx, c, "END2")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "45 123") || !strings.Contains(out, "10.0.0.1/24") {
			t.Errorf("shell output %q, want the size 45 123 and a's address 10.0.0.1/24", out)
		}
		c.Write(ctx, websocket.MessageBinary, []byte("exit 7\n"))
		if _, code, err := terminalRun(ctx, c); err != nil || code != 7 {
			t.Errorf("exit 7 in the shell: %v, code %d", err, code)
		}
	})
	t.Run("client goes away", func(t *testing.T) {
		marker := fmt.Sprintf("1000.%06d", time.Now().UnixNano()%1000000) // a duration sleep takes, unique
		c, err := s.wsDial(ctx, base+"?"+url.Values{"cmd": {"sh", "-c", "echo ready; exec sleep " + marker}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readUntil(ctx, c, "ready"); err != nil {
			t.Fatal(err)
		}
		for i := 0; !processWith("sleep\x00" + marker); i++ {
			if i == 50 {
				t.Fatalf("no sleep %s running 5 s after ready", marker)
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.CloseNow() // no close handshake: the connection just ends
		deadline := time.Now().Add(10 * time.Second)
		for processWith("sleep\x00"+marker) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if processWith("sleep\x00" + marker) {
			t.Errorf("sleep %s still runs 10 s after its client went away", marker)
		}
		s.must(200, "GET", "/networks", "", "")
	})
	t.Run("no such node", func(t *testing.T) {
		s.must(404, "GET", "/networks/"+name+"/nodes/zz/terminal", "", "")
	})
	t.Run("capture", func(t *testing.T) { testAPICapture(t, e, s, name) })

	s.must(204, "DELETE", "/networks/"+name, "", "")
	s.stop()
	e.assertClean()
}

// testAPICapture downloads captures of the link while a pings b: 5 ICMP frames as pcapng,
// a's outbound frames as pcap; and one whose client closes it early, after which the server
// serves the next.
func testAPICapture(t *testing.T, e *env, s *apiServer, name string) {
	path := "/networks/" + name + "/links/a:eth1--b:eth1/capture"
	cases := []struct {
		query, media string
		want         int // ICMP echo lines tcpdump reads
	}{
		{"?count=5&filter=icmp", "application/x-pcapng", 5},
		{"?count=3&filter=icmp&format=pcap&endpoint=a:eth1", "application/vnd.tcpdump.pcap", 3},
	}
	for _, c := range cases {
		resp, err := s.client.Get("http://trellis" + path + c.query)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != c.media {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("capture%s: %d %s\n%s", c.query, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		mustExec(t, e.state, name, "a", "ping", "-c", "3", "-i", "0.2", "10.0.0.2")
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("tcpdump", "-n", "-r", "-")
		cmd.Stdin = bytes.NewReader(data)
		out, err := cmd.CombinedOutput()
		if n := strings.Count(string(out), "ICMP echo"); err != nil || n != c.want {
			t.Errorf("capture%s read by tcpdump: %v; %d ICMP echo lines, want %d:\n%s", c.query, err, n, c.want, out)
		}
	}
	resp, err := s.client.Get("http://trellis" + path)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 4)
	if _, err := io.ReadFull(resp.Body, head); err != nil || !bytes.Equal(head, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		t.Errorf("capture stream starts %x, %v; want a pcapng section header", head, err)
	}
	resp.Body.Close() // the client goes away in the middle
	s.must(404, "GET", "/networks/"+name+"/links/nolink/capture", "", "")
	s.must(200, "GET", path+"?seconds=0.2", "", "")
}
