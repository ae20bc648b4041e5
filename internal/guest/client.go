package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"time"
)

// Client talks to a guest's agent through the unix socket QEMU serves for its port. QEMU
// serves one client at a time; a second one waits until the first closes.
type Client struct {
	conn net.Conn
	rd   *bufio.Reader
	next uint64
}

// Dial connects to the agent behind socket (its path: internal/vmsock) and waits
// until it answers, which after a boot takes as long as the guest needs to start.
func Dial(ctx context.Context, socket string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAgent, err)
	}
	// Random IDs: an answer left over from an earlier client is never taken for ours.
	c := &Client{conn: conn, rd: bufio.NewReader(conn), next: rand.Uint64() >> 1}
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.Do(attempt, &Request{Op: "ping"})
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			conn.Close()
			return nil, fmt.Errorf("%w: no answer: %v", ErrAgent, ctx.Err())
		}
	}
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Do sends req and returns the agent's response; an error the agent reports is returned as an
// error wrapping ErrAgent, with the response.
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	c.next++
	req.ID = c.next
	if dl, ok := ctx.Deadline(); ok {
		_ = c.conn.SetDeadline(dl)
	} else {
		_ = c.conn.SetDeadline(time.Time{})
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(append(data, '\n')); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAgent, err)
	}
	for {
		line, err := c.rd.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrAgent, req.Op, err)
		}
		var resp Response
		if json.Unmarshal(line, &resp) != nil || resp.ID != req.ID {
			continue // an answer to an earlier client's request
		}
		if resp.Error != "" {
			return &resp, fmt.Errorf("%w: %s: %s", ErrAgent, req.Op, resp.Error)
		}
		return &resp, nil
	}
}
