// Package web is the page that `trellis serve` serves at /: the networks, a live graph of one
// with its counters, link state, impairments, captures and terminals, all through the API.
// The page is built from web/ (scripts/web-build.sh: npm packages bundled by esbuild) into
// dist/, which is committed and embedded, so the binary serves it with no network access
// and `go build` needs no npm.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed dist
var dist embed.FS

// Files are the page's files: index.html, app.js, app.css.
func Files() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded: it is there
	}
	return sub
}

// Handler serves the page: / is index.html, and the files of dist beside it. Anything else
// is not found. The page may load only its own scripts, styles and the API.
func Handler() http.Handler {
	files := http.FileServerFS(Files())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache") // revalidated (by modification time) on each load: a new binary serves its own page
		files.ServeHTTP(w, r)
	})
}
