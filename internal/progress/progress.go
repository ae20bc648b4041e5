// Package progress shows how far a long operation is (an up of hundreds of nodes, a bench
// part) on a terminal: one status line at the bottom, a bar with counters or a status with the
// time it has taken, redrawn in place, with the operation's log lines printed above it. In a
// pipe, a file or CI nothing is drawn: New returns nil and the log goes through unchanged.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// redraw is how often the status line is redrawn at most, and refreshed when nothing happens.
const redraw = 100 * time.Millisecond

// Shown tells whether progress is to be drawn on w: a terminal, not in CI ($CI set) and not
// with TERM=dumb.
func Shown(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("CI") == "" && os.Getenv("TERM") != "dumb"
}

// Terminal draws a status line on a terminal. It is an io.Writer for the operation's log
// lines (to log), which it prints above the status line. Its methods are safe for concurrent
// use.
type Terminal struct {
	mu     sync.Mutex
	out    io.Writer // the terminal
	log    io.Writer // where log text goes (out, or io.Discard for none)
	width  int
	status string    // the text of the status line, without the time
	since  time.Time // when the status was set
	shown  bool      // a status line is on the screen
	last   time.Time // when it was drawn
	stop   chan struct{}
	wg     sync.WaitGroup
}

// New returns a Terminal drawing on out, whose log text goes to log, or nil if progress is not
// to be shown on out (see Shown). Close it when the operation ends.
func New(out, log io.Writer) *Terminal {
	if !Shown(out) {
		return nil
	}
	width := 80
	if w, _, err := term.GetSize(int(out.(*os.File).Fd())); err == nil && w > 20 {
		width = w
	}
	return newTerminal(out, log, width)
}

func newTerminal(out, log io.Writer, width int) *Terminal {
	t := &Terminal{out: out, log: log, width: width, stop: make(chan struct{})}
	t.wg.Add(1)
	go t.tick()
	return t
}

// tick redraws the status line, so its time moves while nothing else happens.
func (t *Terminal) tick() {
	defer t.wg.Done()
	tk := time.NewTicker(redraw)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			t.mu.Lock()
			t.draw(false)
			t.mu.Unlock()
		}
	}
}

// Write prints log text above the status line.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clear()
	n, err := t.log.Write(p)
	t.draw(true)
	return n, err
}

// Status sets the status line's text; the time since it was set is shown after it.
func (t *Terminal) Status(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if text != t.status {
		t.status, t.since = text, time.Now()
	}
	t.draw(false)
}

// Progress shows step with done of total items, as a bar and counters.
func (t *Terminal) Progress(step string, done, total int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	text := Bar(step, done, total, t.width-12)
	if !strings.HasPrefix(t.status, step+" ") {
		t.since = time.Now()
	}
	t.status = text
	t.draw(false)
}

// Close clears the status line and stops redrawing it.
func (t *Terminal) Close() {
	close(t.stop)
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clear()
	t.status = ""
}

// draw draws the status line, at most every redraw unless now.
func (t *Terminal) draw(now bool) {
	if t.status == "" || (!now && time.Since(t.last) < redraw) {
		return
	}
	line := fmt.Sprintf("%s  %s", t.status, elapsed(time.Since(t.since)))
	if r := []rune(line); len(r) > t.width-1 {
		line = string(r[:t.width-1])
	}
	fmt.Fprintf(t.out, "\r\x1b[K%s", line)
	t.shown, t.last = true, time.Now()
}

func (t *Terminal) clear() {
	if t.shown {
		io.WriteString(t.out, "\r\x1b[K")
		t.shown = false
	}
}

// Bar writes "step [#####.....] done/total" in at most width characters.
func Bar(step string, done, total, width int) string {
	counts := fmt.Sprintf(" %d/%d", done, total)
	room := width - len(step) - len(counts) - 3
	if total <= 0 || room < 5 {
		return step + counts
	}
	room = min(room, 40)
	fill := min(room*done/total, room)
	return step + " [" + strings.Repeat("#", fill) + strings.Repeat(".", room-fill) + "]" + counts
}

func elapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
