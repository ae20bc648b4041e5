// Package api is the HTTP API of `trellis serve`: what the CLI offers (list, inspect, up, diff,
// down, link state and impairments, exec) as JSON over HTTP, described by an OpenAPI 3 document at /openapi.json
// that huma generates from the Go types of this package. Every operation calls the same
// substrate functions as the CLI. Errors are RFC 9457 problem details (Problem); a problem in a
// topology file carries its file, line, field and fix, as the CLI prints them, and bad input
// changes nothing.
package api

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
)

// Version is the API's version in the OpenAPI document.
const Version = "0.1.0"

// maxFileBytes bounds the topology file a request may carry.
const maxFileBytes = 16 << 20

// Options configure a Server.
type Options struct {
	// Observe, if set, is told how each up went (for the reconcile metrics).
	Observe func(network string, took time.Duration, err error)
	// Log, if set, gets one line per request.
	Log io.Writer
	// Cluster, if set, makes the API serve the cluster's networks, each tenant its own, by
	// the client certificate of each request (tenancy.go), instead of the state directory's.
	Cluster *Cluster
	// Access says who may use the API over TCP (guard.go); root on the unix socket may
	// always. Its zero value lets no TCP client in.
	Access Access
	// Substrate is the machine's choices for the networks it changes (port namespaces, delay
	// way, port hook); each request sets its own Replug and logger.
	Substrate substrate.Options
}

// Server serves the API for one state directory.
type Server struct {
	st      *state.Store
	cl      *Cluster // nil: the state directory's networks
	base    context.Context
	opts    Options
	mux     *http.ServeMux
	api     huma.API
	handler http.Handler
	// media are the media types of the body each operation takes ("POST /networks").
	media map[string][]string
	// reader keeps the nodes' devices and addresses between inspects (nil: each inspect
	// reads them all).
	reader *substrate.Reader
}

// New returns the API of state directory st. Changes run under ctx, not under their
// request's context, so that a client that goes away does not leave a network half-changed;
// cancelling ctx (the server stopping) stops them cleanly, as Ctrl-C stops the CLI.
func New(ctx context.Context, st *state.Store, opts Options) *Server {
	s := &Server{st: st, cl: opts.Cluster, base: ctx, opts: opts, mux: http.NewServeMux()}
	cfg := huma.DefaultConfig("Trellis", Version)
	cfg.Info.Description = "Virtual networks on this machine: list, inspect, up (apply a topology file), diff, down, link state and impairments, exec in nodes, the tables of nodes' dataplane programs."
	cfg.OpenAPIPath = "/openapi" // serves /openapi.json and /openapi.yaml
	cfg.DocsPath = ""            // the docs page loads scripts from the internet
	cfg.CreateHooks = nil        // no $schema fields: bodies are as `trellis inspect --json` prints
	if opts.Cluster == nil {     // a TCP client's token (guard.go); a cluster's clients have certificates
		cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{"token": {Type: "http", Scheme: "bearer",
			Description: "the token of STATE_DIR/api-token (trellis serve --token-file), for a TCP client without a client certificate; root on the unix socket needs none"}}
		cfg.Security = []map[string][]string{{"token": {}}, {}}
	}
	s.api = humago.New(s.mux, cfg)
	s.register()
	s.documentMedia()
	if s.cl != nil {
		s.documentTenancy()
	}
	if st != nil {
		if rd, err := substrate.NewReader(); err == nil { // without it, inspect reads everything each time
			s.reader = rd
			context.AfterFunc(ctx, func() { rd.Close() })
		}
	}
	s.handler = http.HandlerFunc(s.route)
	if opts.Log != nil {
		s.handler = logRequests(s.handler, opts.Log)
	}
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Handle adds another handler to the server's routes (e.g. /metrics), as http.ServeMux takes it.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// OpenAPI returns the API's OpenAPI document.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

func (s *Server) register() {
	huma.Register(s.api, huma.Operation{OperationID: "list-networks", Method: http.MethodGet, Path: "/networks",
		Summary: "List the networks", Description: "The networks of the state directory, as `trellis ls` lists them."}, s.list)
	huma.Register(s.api, huma.Operation{OperationID: "inspect-network", Method: http.MethodGet, Path: "/networks/{network}",
		Summary: "Inspect a network", Description: "Nodes, interfaces, links and counters, read live from the kernel, as `trellis inspect --json` prints them."}, s.inspect)
	huma.Register(s.api, huma.Operation{OperationID: "up", Method: http.MethodPost, Path: "/networks",
		Summary: "Create a network, or change it live to match a topology file", MaxBodyBytes: maxFileBytes,
		Description: "The request body is a topology file (YAML), as `trellis up FILE` takes it. 201 when the network was created, 200 when it was changed or already matched. A file with problems is refused with 422, every problem listed, and nothing changes."}, s.up)
	huma.Register(s.api, huma.Operation{OperationID: "diff", Method: http.MethodPost, Path: "/diff",
		Summary: "Show what up of a topology file would change, changing nothing", MaxBodyBytes: maxFileBytes,
		Description: "The request body is a topology file (YAML), as `trellis diff FILE` takes it."}, s.diff)
	huma.Register(s.api, huma.Operation{OperationID: "down", Method: http.MethodDelete, Path: "/networks/{network}",
		Summary: "Remove a network", Description: "Removes the network and everything trellis made for it, as `trellis down` does.", DefaultStatus: http.StatusNoContent}, s.down)
	huma.Register(s.api, huma.Operation{OperationID: "set-link-state", Method: http.MethodPut, Path: "/networks/{network}/links/{link}/state",
		Summary:     "Take a link's carrier away or give it back",
		Description: "As `trellis link NETWORK LINK up|down [--endpoint NODE:IF]`: the whole link, or one endpoint of it. The state stays until the next up of the file."}, s.linkState)
	s.registerLinks()
	s.registerExec()
	s.registerTerminal()
	s.registerCapture()
	s.registerTables()
}

// logRequests writes one line per request: method, path, status and time taken.
func logRequests(next http.Handler, log io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		fprintf(log, "%s %s %d %.1fms\n", r.Method, r.URL.RequestURI(), sw.status, float64(time.Since(start).Microseconds())/1000)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap gives http.ResponseController and websocket upgrades the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes on (streamed responses).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
