package api

import (
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// route serves r through the server's routes; a request no route takes (an unknown path, or a
// method the path does not offer) gets a problem, as every other error does, instead of
// http.ServeMux's plain text. A 405 keeps the Allow header ServeMux sets.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if !s.guard(w, r, pattern) {
		return
	}
	if s.cl != nil {
		ar, err := s.authorize(r)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		r = ar
	}
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	rec := &headerRecorder{header: http.Header{}, status: http.StatusNotFound}
	h.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	detail := fmt.Sprintf("no operation %s %s", r.Method, r.URL.Path)
	if rec.status == http.StatusMethodNotAllowed {
		detail = fmt.Sprintf("%s does not take %s; it takes %s", r.URL.Path, r.Method, rec.header.Get("Allow"))
	}
	_ = huma.WriteErr(s.api, humago.NewContext(&huma.Operation{}, r, w), rec.status, detail)
}

// writeProblem answers r with err, a Problem (any other error is a 500).
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	p, ok := err.(*Problem)
	if !ok {
		p = &Problem{Status: http.StatusInternalServerError, Detail: err.Error()}
	}
	_ = huma.WriteErr(s.api, humago.NewContext(&huma.Operation{}, r, w), p.Status, p.Detail)
}

// headerRecorder keeps the status and headers a handler writes and drops its body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerRecorder) WriteHeader(status int)      { h.status = status }
