package logline

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestHandlerWritesMessagesByLevel(t *testing.T) {
	var out, log strings.Builder
	l := Logger(&out, &log).With("network", "lab")
	l.Info("3 nodes started in 0.120s", "step", "nodes started", "count", 3)
	l.Warn("re-plugged (--replug): a:eth1 addresses 10.0.0.9/24; it went with the interface", "replugged", "a:eth1")
	l.WithGroup("g").Debug("image: building x", "image", "x")
	l.Error("failed")
	if want := "3 nodes started in 0.120s\nimage: building x\n"; log.String() != want {
		t.Errorf("log = %q, want %q", log.String(), want)
	}
	if want := "re-plugged (--replug): a:eth1 addresses 10.0.0.9/24; it went with the interface\nfailed\n"; out.String() != want {
		t.Errorf("out = %q, want %q", out.String(), want)
	}
}

func TestHandlerNilWriterDrops(t *testing.T) {
	var out strings.Builder
	h := New(&out, nil)
	ctx := context.Background()
	if h.Enabled(ctx, slog.LevelInfo) || !h.Enabled(ctx, slog.LevelWarn) {
		t.Errorf("Enabled(Info)=%v Enabled(Warn)=%v, want false and true", h.Enabled(ctx, slog.LevelInfo), h.Enabled(ctx, slog.LevelWarn))
	}
	slog.New(h).Info("dropped")
	OrDiscard(nil).Warn("dropped too")
	if out.Len() != 0 {
		t.Errorf("out = %q, want nothing", out.String())
	}
}

// bar is a log writer that shows progress, as internal/progress's Terminal does.
type bar struct {
	strings.Builder
	steps []string
}

func (b *bar) Progress(step string, done, total int) {
	b.steps = append(b.steps, step)
}

func TestHandlerForwardsProgress(t *testing.T) {
	b := &bar{}
	l := Logger(nil, b).With("network", "lab")
	p, ok := l.Handler().(Progresser)
	if !ok {
		t.Fatal("the handler of a logger whose log shows progress is no Progresser")
	}
	p.Progress("nodes started", 1, 2)
	l.Info("2 nodes started in 0.010s")
	if len(b.steps) != 1 || b.String() != "2 nodes started in 0.010s\n" {
		t.Errorf("progress %q, log %q", b.steps, b.String())
	}
	if _, ok := Logger(nil, &strings.Builder{}).Handler().(Progresser); ok {
		t.Error("the handler of a plain writer is a Progresser: substrate would tick for nothing")
	}
}
