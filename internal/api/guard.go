package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"golang.org/x/sys/unix"
)

// Who may use the API (docs/security.md, "A local unprivileged user" and "A web page in the
// user's browser"). Root on the unix socket (mode 0600, and its peer's uid checked) may do
// anything without a token. Every TCP client, loopback included, is authenticated: by a client
// certificate of the server's client CA, or by the token (a bearer token, or for the web page a
// cookie it got in exchange for the token in the address serve printed). TCP requests must
// name the server by one of its names (Host: no DNS rebinding), and come from no other page
// (Origin, Sec-Fetch-Site). Every request with a body sends the media type its operation
// documents (no form or text/plain body, which a page elsewhere can send without asking).

// Access says who may use the API over TCP.
type Access struct {
	// Token is what TCP clients without a client certificate present (nil: they have none
	// to present, and only client certificates get in).
	Token []byte
	// Hosts are the names the server is reached by, as a Host header names them (without
	// the port): the listen address, the loopback names for a loopback one, --host names.
	Hosts []string
	// Cookie names the cookie the web page gets in exchange for the token.
	Cookie string
}

// TokenParam is the query parameter of the page's address that carries the token once.
const TokenParam = "token"

type peerKey struct{}

// ConnContext records, for a connection to the unix socket, the uid of the process at its
// other end (SO_PEERCRED), for http.Server.ConnContext.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, int(cred.Uid))
}

// fromRoot tells whether the request of ctx came over the unix socket, and from root (or the
// server's own user).
func fromRoot(ctx context.Context) (unixPeer, root bool) {
	uid, ok := ctx.Value(peerKey{}).(int)
	return ok, ok && (uid == 0 || uid == os.Geteuid())
}

// guard checks request r, whose route is pattern ("POST /networks"). It answers a request
// it refuses with a Problem (the page's address with the token: with a redirect) and returns
// false.
func (s *Server) guard(w http.ResponseWriter, r *http.Request, pattern string) bool {
	done, err := s.check(w, r, pattern)
	if err != nil {
		s.writeProblem(w, r, err)
	}
	return !done && err == nil
}

func (s *Server) check(w http.ResponseWriter, r *http.Request, pattern string) (done bool, err error) {
	if unixPeer, root := fromRoot(r.Context()); unixPeer {
		if !root {
			return false, newProblem(http.StatusForbidden, "the unix socket serves root only")
		}
		return false, s.checkBody(r, pattern)
	}
	a := &s.opts.Access
	if err := a.checkHost(r); err != nil {
		return false, err
	}
	if err := checkOrigin(r); err != nil {
		return false, err
	}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 { // a client certificate authenticates
		if done, err := a.authenticate(w, r); err != nil || done {
			return done, err
		}
	}
	return false, s.checkBody(r, pattern)
}

// hostname is the host of a Host header or an Origin's host, without port, brackets or a
// trailing dot, in lower case.
func hostname(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// checkHost refuses a Host that is not one of the server's names: a page under another name
// that resolves to the server (DNS rebinding) would be of its own origin.
func (a *Access) checkHost(r *http.Request) error {
	if slices.Contains(a.Hosts, hostname(r.Host)) {
		return nil
	}
	return newProblem(http.StatusMisdirectedRequest, fmt.Sprintf("Host %q is not a name of this server (%s): a page under another name is refused; "+
		"if the server is reached by that name, give trellis serve --host %s", r.Host, strings.Join(a.Hosts, ", "), hostname(r.Host)))
}

// checkOrigin refuses a request a page of another origin makes: one whose Origin is not the
// server's own (scheme://Host), and, as browsers mark it, any but a top-level navigation from
// another site or another port (a page elsewhere may link to the page, not call the API).
func checkOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if err != nil || u.Scheme != scheme || !strings.EqualFold(u.Host, r.Host) {
			return newProblem(http.StatusForbidden, fmt.Sprintf("a request from a page of %s is refused: only the page this server serves (%s://%s) may call the API", o, scheme, r.Host))
		}
	}
	site := r.Header.Get("Sec-Fetch-Site")
	navigate := r.Header.Get("Sec-Fetch-Mode") == "navigate" && (r.Method == http.MethodGet || r.Method == http.MethodHead)
	if (site == "cross-site" || site == "same-site") && !navigate {
		return newProblem(http.StatusForbidden, fmt.Sprintf("a request from a page of another site or port (Sec-Fetch-Site: %s) is refused: only the page this server serves may call the API", site))
	}
	return nil
}

// authenticate checks the token of a TCP client without a client certificate: the bearer
// token, or the web page's cookie; for the page's address with ?token=, it sets the cookie and
// sends the browser to the address without it (done). An error is a 401 Problem.
func (a *Access) authenticate(w http.ResponseWriter, r *http.Request) (done bool, err error) {
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		if a.valid(strings.TrimSpace(tok)) {
			return false, nil
		}
		return false, unauthorized(w, "the bearer token is not this server's; it is in the token file (trellis serve --token-file, default STATE_DIR/api-token)")
	}
	if c, err := r.Cookie(a.Cookie); err == nil && a.valid(c.Value) {
		return false, nil
	}
	q := r.URL.Query()
	if tok := q.Get(TokenParam); tok != "" && r.Method == http.MethodGet && r.URL.Path == "/" {
		if !a.valid(tok) {
			return false, unauthorized(w, "the token in the address is not this server's: open the address trellis serve printed")
		}
		http.SetCookie(w, &http.Cookie{Name: a.Cookie, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		q.Del(TokenParam)
		to := url.URL{Path: "/", RawQuery: q.Encode()}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, to.String(), http.StatusSeeOther) // the token leaves the address bar
		return true, nil
	}
	return false, unauthorized(w, "this API needs its token: send Authorization: Bearer TOKEN (the token is in STATE_DIR/api-token, readable by root), "+
		"or open in a browser the address trellis serve printed (/?token=...)")
}

func unauthorized(w http.ResponseWriter, msg string) error {
	w.Header().Set("WWW-Authenticate", `Bearer realm="trellis"`)
	return newProblem(http.StatusUnauthorized, msg)
}

// valid compares tok with the token in constant time (of the token's length too: both are
// hashed first).
func (a *Access) valid(tok string) bool {
	if len(a.Token) == 0 || tok == "" {
		return false
	}
	got, want := sha256.Sum256([]byte(tok)), sha256.Sum256(a.Token)
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// checkBody refuses a request with a body of a media type its operation does not document
// (pattern is the route's, "POST /networks"): a page elsewhere can send a form or text/plain
// without asking, never application/json or application/yaml.
func (s *Server) checkBody(r *http.Request, pattern string) error {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	takes := s.media[pattern]
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && slices.Contains(takes, mt) {
		return nil
	}
	if len(takes) == 0 {
		return newProblem(http.StatusUnsupportedMediaType, fmt.Sprintf("%s %s takes no body (Content-Type %q)", r.Method, r.URL.Path, ct))
	}
	return newProblem(http.StatusUnsupportedMediaType, fmt.Sprintf("%s %s takes a body of type %s, not %q: send Content-Type: %s",
		r.Method, r.URL.Path, strings.Join(takes, " or "), ct, takes[0]))
}

// documentMedia records, for each operation, the media types of the body it takes, as the
// OpenAPI document lists them.
func (s *Server) documentMedia() {
	s.media = map[string][]string{}
	for path, item := range s.api.OpenAPI().Paths {
		for method, op := range map[string]*huma.Operation{"POST": item.Post, "PUT": item.Put, "PATCH": item.Patch, "DELETE": item.Delete} {
			if op == nil {
				continue
			}
			var types []string
			if op.RequestBody != nil {
				for mt := range op.RequestBody.Content {
					types = append(types, mt)
				}
			}
			slices.Sort(types)
			s.media[method+" "+path] = types
		}
	}
}
