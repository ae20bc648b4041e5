package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	cases := []struct {
		path, ctype, contains string
		status                int
	}{
		{"/", "text/html", `<script src="app.js">`, 200},
		{"/app.js", "text/javascript", "cytoscape", 200},
		{"/app.css", "text/css", ".xterm", 200},
		{"/nothing.js", "", "", 404},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(body), c.contains) {
				t.Errorf("GET %s: %d %s, want %d %s with %q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.status, c.ctype, c.contains)
			}
			if c.status == 200 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
				t.Errorf("GET %s: no content security policy", c.path)
			}
		})
	}
}
