// Package logline is the slog handler of the command line and of the API's replies: each
// record's message is written as one line of plain text, as a user reads it, and its attributes
// are left out (they are there for structured handlers, such as the agent's). Records at Warn
// and above are what an operation always tells (a re-plug, a link that keeps its ports: `up`
// prints them on stdout); records below Warn are its progress (`up -v` prints them on stderr).
package logline

import (
	"context"
	"io"
	"log/slog"
	"sync"
)

// Progresser is a writer that also shows how far a step is (a terminal's progress line,
// internal/progress): step, items done, items in all.
type Progresser interface {
	Progress(step string, done, total int)
}

// Handler writes each record's message as a line: at Warn and above to its out, below Warn to
// its log; a nil writer drops those records. Safe for concurrent use.
type Handler struct {
	mu  *sync.Mutex
	out io.Writer
	log io.Writer
}

// New returns a handler writing what an operation always tells to out and its progress to log
// (nil: dropped). If log is a Progresser, so is the handler: substrate then tells it how far
// each step is.
func New(out, log io.Writer) slog.Handler {
	h := &Handler{mu: &sync.Mutex{}, out: out, log: log}
	if p, ok := log.(Progresser); ok {
		return &progressing{Handler: h, p: p}
	}
	return h
}

// Logger is slog.New(New(out, log)).
func Logger(out, log io.Writer) *slog.Logger { return slog.New(New(out, log)) }

func (h *Handler) writer(l slog.Level) io.Writer {
	if l >= slog.LevelWarn {
		return h.out
	}
	return h.log
}

// Enabled tells whether records of level l are written anywhere.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return h.writer(l) != nil }

// Handle writes r's message and a newline.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	w := h.writer(r.Level)
	if w == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(w, r.Message+"\n")
	return err
}

// WithAttrs returns h: attributes are not written.
func (h *Handler) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h: attributes are not written.
func (h *Handler) WithGroup(string) slog.Handler { return h }

// progressing is a Handler whose log also shows progress.
type progressing struct {
	*Handler
	p Progresser
}

func (h *progressing) Progress(step string, done, total int) { h.p.Progress(step, done, total) }
func (h *progressing) WithAttrs([]slog.Attr) slog.Handler    { return h }
func (h *progressing) WithGroup(string) slog.Handler         { return h }

// discard drops every record.
var discard = slog.New(slog.DiscardHandler)

// OrDiscard returns l, or a logger that drops everything if l is nil: an operation's logger is
// optional.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}
