package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/trellisnet/trellis/internal/kinds/all" // the kinds files may name
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/testkit"
)

const twoYAML = `name: two
nodes:
  a: {addresses: {eth1: [10.0.0.1/24]}}
  b: {addresses: {eth1: [10.0.0.2/24]}}
links:
  - endpoints: [a:eth1, b:eth1]
`

// badYAML has two problems: a rate tc cannot read (line 6) and an unknown key (line 7).
const badYAML = `name: two
nodes:
  a: {}
  b: {}
links:
  - endpoints: [a:eth1, b:eth1]
    rate: fast
    colour: red
`

func newTestServer(t *testing.T) (*httptest.Server, *state.Store) {
	t.Helper()
	st, err := state.Open(testkit.TempStateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(context.Background(), st, Options{Access: testAccess}))
	t.Cleanup(srv.Close)
	return srv, st
}

func do(t *testing.T, srv *httptest.Server, method, path, contentType, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+string(testAccess.Token))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), data
}

// TestErrors sends bad requests: each gets its status and a problem+json body, and the state
// directory is left as it was (no record, no lock file).
func TestErrors(t *testing.T) {
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		detail                          string         // in the problem's detail
		first                           *ProblemDetail // the first problem, if given
		check                           func(*testing.T, *Problem)
	}{
		{name: "inspect unknown network", method: "GET", path: "/networks/nope", status: 404, detail: "no network named nope"},
		{name: "down unknown network", method: "DELETE", path: "/networks/nope", status: 404, detail: "no network named nope"},
		{name: "link of unknown network", method: "PUT", path: "/networks/nope/links/a:eth1--b:eth1/state", ctype: "application/json",
			body: `{"state":"down"}`, status: 404, detail: "no network named nope"},
		{name: "link state neither up nor down", method: "PUT", path: "/networks/nope/links/l/state", ctype: "application/json",
			body: `{"state":"sideways"}`, status: 422, first: &ProblemDetail{Location: "body.state"}},
		{name: "endpoint not NODE:IF", method: "PUT", path: "/networks/nope/links/l/state", ctype: "application/json",
			body: `{"state":"up","endpoint":"a"}`, status: 422, first: &ProblemDetail{Location: "body.endpoint"}},
		{name: "malformed JSON", method: "PUT", path: "/networks/nope/links/l/state", ctype: "application/json",
			body: `{"state":`, status: 400},
		{name: "impairments of unknown network", method: "PUT", path: "/networks/nope/links/l/impairments", ctype: "application/json",
			body: `{"loss":5}`, status: 404, detail: "no network named nope"},
		{name: "loss over 100%", method: "PUT", path: "/networks/nope/links/l/impairments", ctype: "application/json",
			body: `{"loss":150}`, status: 422, first: &ProblemDetail{Location: "body.loss", Value: 150.0}},
		{name: "negative corruption", method: "PUT", path: "/networks/nope/links/l/impairments", ctype: "application/json",
			body: `{"corrupt":-1}`, status: 422, first: &ProblemDetail{Location: "body.corrupt", Value: -1.0}},
		{name: "unknown impairment key", method: "PUT", path: "/networks/nope/links/l/impairments", ctype: "application/json",
			body: `{"colour":"red"}`, status: 422, first: &ProblemDetail{Location: "body.colour"}},
		{name: "delay out of range", method: "PUT", path: "/networks/nope/links/l/impairments", ctype: "application/json",
			body: `{"delay":"2h"}`, status: 422, first: &ProblemDetail{Location: "body.delay", Value: "2h"}},
		{name: "jitter without delay", method: "PUT", path: "/networks/nope/links/l/impairments", ctype: "application/json",
			body: `{"jitter":"2ms"}`, status: 422, first: &ProblemDetail{Location: "body.jitter"}},
		{name: "unknown distribution", method: "PUT", path: "/networks/nope/links/l/impairments", ctype: "application/json",
			body: `{"delay":"2ms","jitter":"1ms","distribution":"cauchy"}`, status: 422, first: &ProblemDetail{Location: "body.distribution"}},
		{name: "impairment endpoint not NODE:IF", method: "PUT", path: "/networks/nope/links/l/impairments", ctype: "application/json",
			body: `{"loss":1,"endpoint":"a"}`, status: 422, first: &ProblemDetail{Location: "body.endpoint"}},
		{name: "exec in unknown network", method: "POST", path: "/networks/nope/nodes/a/exec", ctype: "application/json",
			body: `{"argv":["true"]}`, status: 404, detail: "no network named nope"},
		{name: "exec of no command", method: "POST", path: "/networks/nope/nodes/a/exec", ctype: "application/json",
			body: `{"argv":[]}`, status: 422, first: &ProblemDetail{Location: "body.argv"}},
		{name: "exec without argv", method: "POST", path: "/networks/nope/nodes/a/exec", ctype: "application/json",
			body: `{"stdin":"x"}`, status: 422, first: &ProblemDetail{Location: "body"}, detail: "validation failed"},
		{name: "exec with a negative timeout", method: "POST", path: "/networks/nope/nodes/a/exec", ctype: "application/json",
			body: `{"argv":["true"],"timeout":-1}`, status: 422, first: &ProblemDetail{Location: "body.timeout", Value: -1.0}},
		{name: "exec body malformed", method: "POST", path: "/networks/nope/nodes/a/exec", ctype: "application/json",
			body: `{"argv":["true"`, status: 400},
		{name: "tables of unknown network", method: "GET", path: "/networks/nope/nodes/s1/tables", status: 404, detail: "no network named nope"},
		{name: "dump of unknown network", method: "GET", path: "/networks/nope/nodes/s1/tables/routes", status: 404, detail: "no network named nope"},
		{name: "set entry of unknown network", method: "PUT", path: "/networks/nope/nodes/s1/tables/routes/entries/0a", ctype: "application/json",
			body: `{"value":"0b"}`, status: 404, detail: "no network named nope"},
		{name: "set entry without value", method: "PUT", path: "/networks/nope/nodes/s1/tables/routes/entries/0a", ctype: "application/json",
			body: `{}`, status: 422, first: &ProblemDetail{Location: "body"}, detail: "validation failed"},
		{name: "set entry as text", method: "PUT", path: "/networks/nope/nodes/s1/tables/routes/entries/0a", ctype: "text/plain",
			body: `{"value":"0b"}`, status: 415, detail: "takes a body of type application/json"},
		{name: "delete entry of unknown network", method: "DELETE", path: "/networks/nope/nodes/s1/tables/routes/entries/0a", status: 404, detail: "no network named nope"},
		{name: "up with no body", method: "POST", path: "/networks", ctype: "application/yaml", status: 400, detail: "request body is required"},
		{name: "up of blanks", method: "POST", path: "/networks", ctype: "application/yaml", body: "\n  \n", status: 400, detail: "no body",
			first: &ProblemDetail{Location: "body"}},
		{name: "up of a file with problems", method: "POST", path: "/networks?file=lab.yaml", ctype: "application/yaml", body: badYAML,
			status: 422, detail: "2 problems; nothing was changed",
			first: &ProblemDetail{Location: "body", File: "lab.yaml", Line: 7, Field: "links[0].rate"},
			check: func(t *testing.T, p *Problem) {
				if len(p.Errors) != 2 || p.Errors[0].Fix == "" || p.Errors[1].Line != 8 || p.Errors[1].Field != "links[0].colour" {
					t.Errorf("problems: %+v %+v", p.Errors[0], p.Errors[len(p.Errors)-1])
				}
			}},
		{name: "up of something not YAML", method: "POST", path: "/networks", ctype: "application/yaml", body: "name: [x\n  y: {",
			status: 422, first: &ProblemDetail{Location: "body", File: "request.yaml", Line: 1, Field: "(file)"}},
		{name: "diff of a file with problems", method: "POST", path: "/diff", ctype: "application/yaml", body: badYAML,
			status: 422, first: &ProblemDetail{Location: "body", File: "request.yaml", Line: 7, Field: "links[0].rate"}},
		{name: "capture of unknown network", method: "GET", path: "/networks/nope/links/l/capture", status: 404, detail: "no network named nope"},
		{name: "capture with a filter tcpdump refuses", method: "GET", path: "/networks/nope/links/l/capture?filter=icmp+and+", status: 422,
			first: &ProblemDetail{Location: "query.filter", Value: "icmp and"}},
		{name: "capture of a negative count", method: "GET", path: "/networks/nope/links/l/capture?count=-1", status: 422,
			first: &ProblemDetail{Location: "query.count"}},
		{name: "capture in an unknown format", method: "GET", path: "/networks/nope/links/l/capture?format=cap", status: 422,
			first: &ProblemDetail{Location: "query.format", Value: "cap"}},
		{name: "capture of an endpoint not NODE:IF", method: "GET", path: "/networks/nope/links/l/capture?endpoint=r1", status: 422,
			first: &ProblemDetail{Location: "query.endpoint", Value: "r1"}},
		{name: "terminal of unknown network", method: "GET", path: "/networks/nope/nodes/a/terminal", status: 404, detail: "no network named nope"},
		{name: "terminal too wide", method: "GET", path: "/networks/nope/nodes/a/terminal?cols=5000", status: 422,
			first: &ProblemDetail{Location: "query.cols"}},
		{name: "impairments body malformed", method: "PUT", path: "/networks/nope/links/l/impairments", ctype: "application/json",
			body: `{"loss":`, status: 400, first: &ProblemDetail{Location: "body"}},
		{name: "link state body not an object", method: "PUT", path: "/networks/nope/links/l/state", ctype: "application/json",
			body: `["down"]`, status: 422, first: &ProblemDetail{Location: "body"}},
		{name: "link state with an unknown key", method: "PUT", path: "/networks/nope/links/l/state", ctype: "application/json",
			body: `{"state":"down","colour":1}`, status: 422, first: &ProblemDetail{Location: "body.colour"}},
		{name: "link state not JSON", method: "PUT", path: "/networks/nope/links/l/state", ctype: "text/plain",
			body: `state=down`, status: 415, detail: "takes a body of type application/json, not \"text/plain\""},
		{name: "link state as a form", method: "PUT", path: "/networks/nope/links/l/state", ctype: "application/x-www-form-urlencoded",
			body: `state=down`, status: 415, detail: "send Content-Type: application/json"},
		{name: "up of a form", method: "POST", path: "/networks", ctype: "application/x-www-form-urlencoded", body: "name=x",
			status: 415, detail: "takes a body of type application/yaml"},
		{name: "up of text/plain", method: "POST", path: "/networks", ctype: "text/plain", body: twoYAML,
			status: 415, detail: "takes a body of type application/yaml"},
		{name: "up without a media type", method: "POST", path: "/networks", body: twoYAML, status: 415, detail: "send Content-Type: application/yaml"},
		{name: "exec as multipart", method: "POST", path: "/networks/nope/nodes/a/exec", ctype: "multipart/form-data; boundary=x",
			body: "--x--", status: 415, detail: "application/json"},
		{name: "down with a body", method: "DELETE", path: "/networks/nope", ctype: "text/plain", body: "x", status: 415, detail: "takes no body"},
		{name: "exec argv not a list", method: "POST", path: "/networks/nope/nodes/a/exec", ctype: "application/json",
			body: `{"argv":"ls"}`, status: 422, first: &ProblemDetail{Location: "body.argv", Value: "ls"}},
		{name: "up of JSON", method: "POST", path: "/networks", ctype: "application/json", body: `{"name": "x", "nodes": {}}`,
			status: 415, detail: "send Content-Type: application/yaml"},
		{name: "up of a file naming a host file", method: "POST", path: "/networks?file=lab.yaml", ctype: "application/yaml",
			body: "name: x\nnodes:\n  a:\n    files:\n      - {path: /etc/x, source: /etc/shadow}\n", status: 422,
			first: &ProblemDetail{Location: "body", File: "lab.yaml", Line: 5, Field: "nodes.a.files[0].source"}},
		{name: "up of a network with a bad name", method: "POST", path: "/networks", ctype: "application/yaml", body: "name: \"bad name!\"\nnodes: {a: {}}\n",
			status: 422, first: &ProblemDetail{Location: "body", File: "request.yaml", Line: 1, Field: "name"}},
		{name: "diff of something not YAML", method: "POST", path: "/diff", ctype: "application/yaml", body: "name: [x\n  y: {",
			status: 422, first: &ProblemDetail{Location: "body", File: "request.yaml", Line: 1, Field: "(file)"}},
		{name: "capture count not a number", method: "GET", path: "/networks/nope/links/l/capture?count=abc", status: 422,
			first: &ProblemDetail{Location: "query.count", Value: "abc"}},
		{name: "terminal rows not a number", method: "GET", path: "/networks/nope/nodes/a/terminal?rows=abc", status: 422,
			first: &ProblemDetail{Location: "query.rows", Value: "abc"}},
		{name: "a method the path does not take", method: "DELETE", path: "/networks", status: 405,
			detail: "/networks does not take DELETE; it takes GET, HEAD, POST"},
		{name: "a path the API does not have", method: "GET", path: "/nets", status: 404, detail: "no operation GET /nets"},
		{name: "up for a host the file lacks", method: "POST", path: "/networks?host=m9", ctype: "application/yaml", body: twoYAML,
			status: 422, first: &ProblemDetail{Location: "query.host", Value: "m9"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, st := newTestServer(t)
			status, ctype, body := do(t, srv, c.method, c.path, c.ctype, c.body)
			if status != c.status || ctype != "application/problem+json" {
				t.Fatalf("status %d %s, want %d application/problem+json\n%s", status, ctype, c.status, body)
			}
			var p Problem
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("not a problem: %v\n%s", err, body)
			}
			if p.Status != c.status || p.Title != http.StatusText(c.status) || !strings.Contains(p.Detail, c.detail) {
				t.Errorf("problem %+v, want status %d and detail with %q", p, c.status, c.detail)
			}
			if c.first != nil {
				if len(p.Errors) == 0 {
					t.Fatalf("no problem details:\n%s", body)
				}
				got, want := p.Errors[0], c.first
				if got.Message == "" || got.Location != want.Location || got.File != want.File || got.Line != want.Line ||
					got.Field != want.Field || (want.Value != nil && got.Value != want.Value) {
					t.Errorf("first problem %+v, want %+v", got, want)
				}
			}
			if c.check != nil {
				c.check(t, &p)
			}
			if files, _ := os.ReadDir(filepath.Join(st.Dir, "networks")); len(files) != 0 {
				t.Errorf("the state directory changed: %v", files)
			}
		})
	}
}

func TestListEmpty(t *testing.T) {
	srv, _ := newTestServer(t)
	status, _, body := do(t, srv, "GET", "/networks", "", "")
	if status != 200 || strings.TrimSpace(string(body)) != `{"networks":[]}` {
		t.Errorf("GET /networks: %d %s", status, body)
	}
}

// TestDiffOfNewNetwork needs no kernel: everything of a network not up is to be added.
func TestDiffOfNewNetwork(t *testing.T) {
	srv, st := newTestServer(t)
	status, _, body := do(t, srv, "POST", "/diff", "application/yaml", twoYAML)
	if status != 200 {
		t.Fatalf("POST /diff: %d %s", status, body)
	}
	var d DiffResult
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.Changes {
		got = append(got, c.String())
	}
	want := "+ node a|+ node b|+ link a:eth1--b:eth1"
	if d.Network != "two" || strings.Join(got, "|") != want {
		t.Errorf("diff: %s %v, want two %s", d.Network, got, want)
	}
	if files, _ := os.ReadDir(filepath.Join(st.Dir, "networks")); len(files) != 0 {
		t.Errorf("diff changed the state directory: %v", files)
	}
}

// TestOpenAPI checks the document is served and describes every operation and the problems.
func TestOpenAPI(t *testing.T) {
	srv, _ := newTestServer(t)
	status, ctype, body := do(t, srv, "GET", "/openapi.json", "", "")
	if status != 200 || !strings.HasPrefix(ctype, "application/") {
		t.Fatalf("GET /openapi.json: %d %s", status, ctype)
	}
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi %q, want 3.x", doc.OpenAPI)
	}
	ops := map[string]string{"/networks get": "list-networks", "/networks post": "up", "/networks/{network} get": "inspect-network",
		"/networks/{network} delete": "down", "/diff post": "diff", "/networks/{network}/links/{link}/state put": "set-link-state",
		"/networks/{network}/links/{link}/impairments put": "set-link-impairments", "/networks/{network}/nodes/{node}/exec post": "exec",
		"/networks/{network}/links/{link}/capture get": "capture", "/networks/{network}/nodes/{node}/terminal get": "terminal",
		"/networks/{network}/nodes/{node}/tables get": "list-tables", "/networks/{network}/nodes/{node}/tables/{table} get": "dump-table",
		"/networks/{network}/nodes/{node}/tables/{table}/entries/{key} get":    "get-table-entry",
		"/networks/{network}/nodes/{node}/tables/{table}/entries/{key} put":    "set-table-entry",
		"/networks/{network}/nodes/{node}/tables/{table}/entries/{key} delete": "delete-table-entry"}
	for key, id := range ops {
		path, method, _ := strings.Cut(key, " ")
		op := doc.Paths[path][method]
		if op == nil || op["operationId"] != id {
			t.Errorf("%s %s: operation %v, want %s", method, path, op["operationId"], id)
		}
	}
	if !strings.Contains(string(body), `"securitySchemes":{"token":{`) || !strings.Contains(string(body), `"scheme":"bearer","type":"http"`) ||
		!strings.Contains(string(body), `"security":[{"token":[]},{}]`) {
		t.Errorf("the document describes no bearer token")
	}
	if yaml := doc.Paths["/networks"]["post"]["requestBody"]; !strings.Contains(toJSON(yaml), "application/yaml") {
		t.Errorf("up's request body is not YAML: %s", toJSON(yaml))
	}
	for _, f := range []string{"file", "line", "field", "message", "fix", "location"} {
		if _, ok := doc.Components.Schemas["ProblemDetail"].Properties[f]; !ok {
			t.Errorf("schema ProblemDetail has no %s", f)
		}
	}
	for _, f := range []string{"nodes", "links", "egre"} {
		if _, ok := doc.Components.Schemas["NetworkInfo"].Properties[f]; !ok {
			t.Errorf("schema NetworkInfo has no %s", f)
		}
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A capture's filter is tcpdump's expression, never its options: `-F FILE` would make tcpdump
// (as root) read FILE, here one that holds a filter that compiles.
func TestCaptureFilterIsAnExpression(t *testing.T) {
	srv, _ := newTestServer(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("icmp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	status, _, body := do(t, srv, "GET", "/networks/nope/links/l/capture?filter=-F"+secret, "", "")
	var p Problem
	json.Unmarshal(body, &p)
	if status != 422 || len(p.Errors) == 0 || p.Errors[0].Location != "query.filter" || !strings.Contains(p.Detail, "pcap expression") {
		t.Errorf("capture with filter -F%s: %d %s; want 422 on query.filter, a filter that is an expression", secret, status, body)
	}
}
