package api

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// The token of the API's TCP clients (docs/api.md, "Authentication"): a random secret in a
// file only root reads, made by the first `trellis serve` and kept across restarts, which a
// client sends as `Authorization: Bearer TOKEN` (a browser: as a cookie, guard.go).

// tokenBytes is how many random bytes a new token has (base64url: 43 characters).
const tokenBytes = 32

// minTokenLen is the fewest characters a token file's token may have.
const minTokenLen = 32

// ErrTokenFile is returned for a token file that cannot serve: readable by others, not owned
// by the server's user, not a regular file, or holding no usable token.
var ErrTokenFile = errors.New("token file")

// LoadToken returns the token in file path, making the file (mode 0600, a new random token)
// if it does not exist. A file another user owns or may read, a link, or a
// token too short or with characters a header cannot carry is refused: nothing is changed.
func LoadToken(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return makeToken(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrTokenFile, path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrTokenFile, path, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w %s: not a regular file; remove it, and serve makes a new one", ErrTokenFile, path)
	case st != nil && int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("%w %s: owned by uid %d, not by the server's user %d; chown it, or remove it and serve makes a new one", ErrTokenFile, path, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%w %s: mode %04o lets other users read the token; chmod 600 %s, and make a new token (remove the file) if someone may have read it", ErrTokenFile, path, fi.Mode().Perm(), path)
	}
	data := make([]byte, 4096)
	n, err := f.Read(data)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrTokenFile, path, err)
	}
	token := bytes.TrimSpace(data[:n])
	if len(token) < minTokenLen || !isToken68(token) {
		return nil, fmt.Errorf("%w %s: the token must be at least %d characters of A-Z a-z 0-9 - . _ ~ + /; remove the file, and serve makes a new one",
			ErrTokenFile, path, minTokenLen)
	}
	return token, nil
}

// makeToken writes a new random token to a new file path, readable by its owner only.
func makeToken(path string) ([]byte, error) {
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	token := []byte(base64.RawURLEncoding.EncodeToString(raw))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w %s: making it: %v", ErrTokenFile, path, err)
	}
	if _, err := f.Write(append(token, '\n')); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("%w %s: %v", ErrTokenFile, path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("%w %s: %v", ErrTokenFile, path, err)
	}
	return token, nil
}

// isToken68 tells whether b is made of the characters of a bearer token (RFC 6750's b64token,
// without the trailing '='), which a header and a cookie carry as they are.
func isToken68(b []byte) bool {
	for _, c := range b {
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || bytes.IndexByte([]byte("-._~+/"), c) >= 0
		if !ok {
			return false
		}
	}
	return true
}
