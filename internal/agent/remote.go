package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The agent's endpoint (docs/cluster.md, "exec and link"): HTTPS with mutual TLS, where the
// client's certificate says who calls (its common name: a tenant, or root, the administrator).
// The agent runs a command in a node it holds, or takes a link's carrier away and back, for the
// tenant that owns the network in etcd, and for no one else.
const (
	ExecPath = "/v1/exec"
	LinkPath = "/v1/link"
)

// ErrRefused: the agent refused the request (another tenant's network, no such network or node
// on the machine, a bad request); the error says which.
var ErrRefused = errors.New("refused by the agent")

// ExecRequest is a command to run in a node, without a terminal.
type ExecRequest struct {
	// Tenant is the network's tenant. A tenant's certificate may only name itself (or none);
	// the administrator's may name any.
	Tenant  string   `json:"tenant,omitempty"`
	Network string   `json:"network"`
	Node    string   `json:"node"`
	Argv    []string `json:"argv"`
	Stdin   string   `json:"stdin,omitempty"`
	Timeout float64  `json:"timeout,omitempty"` // seconds; 0: DefaultExecTimeout
}

// ExecResult is how the command ended and what it wrote.
type ExecResult struct {
	ExitCode  int     `json:"exit_code"` // 128+N if signal N ended it
	Stdout    string  `json:"stdout"`
	Stderr    string  `json:"stderr"`
	TimedOut  bool    `json:"timed_out,omitempty"`
	Truncated bool    `json:"truncated,omitempty"` // stdout or stderr was cut at node.MaxOutput
	Seconds   float64 `json:"seconds"`
	Machine   string  `json:"machine"` // the machine it ran on
}

// LinkRequest takes a link's carrier away (Up false) or gives it back, at the link's endpoints
// on the agent's machine (or at Endpoint, NODE:IF, alone).
type LinkRequest struct {
	Tenant   string `json:"tenant,omitempty"`
	Network  string `json:"network"`
	Link     string `json:"link"`
	Endpoint string `json:"endpoint,omitempty"`
	Up       bool   `json:"up"`
}

// DefaultExecTimeout is how long a command may run unless the request says otherwise.
const DefaultExecTimeout = 60 * time.Second

// Client calls agents' endpoints with a certificate (a tenant's or the administrator's).
type Client struct {
	http *http.Client
}

// NewClient is a client that presents tc's certificate and checks the agents' against its CA.
func NewClient(tc *tls.Config) *Client {
	return &Client{http: &http.Client{Transport: &http.Transport{TLSClientConfig: tc, TLSHandshakeTimeout: 5 * time.Second}}}
}

// Exec runs req in a node through the agent at endpoint (https://HOST:PORT).
func (c *Client) Exec(ctx context.Context, endpoint string, req *ExecRequest) (*ExecResult, error) {
	var res ExecResult
	return &res, c.call(ctx, endpoint+ExecPath, req, &res)
}

// Link changes a link's state through the agent at endpoint.
func (c *Client) Link(ctx context.Context, endpoint string, req *LinkRequest) error {
	return c.call(ctx, endpoint+LinkPath, req, nil)
}

// apiError is an agent's answer to a request it refused or that failed.
type apiError struct {
	Error string `json:"error"`
}

func (c *Client) call(ctx context.Context, url string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("agent %s: %w (is the agent running with --listen, and does it trust this certificate?)", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("agent %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		var ae apiError
		if json.Unmarshal(data, &ae) != nil || ae.Error == "" {
			ae.Error = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(data))
		}
		return fmt.Errorf("%w: %s", ErrRefused, ae.Error)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
