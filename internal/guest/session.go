package guest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// serveTTY serves interactive sessions on the terminal port, one at a time: a new session ends
// the one before (its host went away without a word).
func (a *agent) serveTTY() {
	port, err := openPort(TTYPortName, 60*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trellis guest agent: no terminal port:", err)
		return
	}
	w := &lockedWriter{f: port}
	var cur *session
	var next uint64
	for {
		typ, payload, err := ReadFrame(port)
		if err != nil { // the host closed its end: reads fail until it connects again
			time.Sleep(20 * time.Millisecond)
			continue
		}
		switch typ {
		case FrameStart:
			if cur != nil {
				cur.hangUp()
			}
			var s Session
			if err := json.Unmarshal(payload, &s); err != nil || len(s.Argv) == 0 {
				next++
				w.switchTo(next)
				w.frame(next, FrameData, []byte(fmt.Sprintf("trellis: bad session request (%v)\r\n", err)))
				w.exit(next, 127)
				continue
			}
			next++
			w.switchTo(next)
			if cur, err = a.startSession(w, next, s); err != nil {
				w.frame(next, FrameData, []byte(fmt.Sprintf("trellis: %v\r\n", err)))
				w.exit(next, 127)
			}
		case FrameData:
			if cur != nil {
				cur.ptmx.Write(payload)
			}
		case FrameResize:
			var sz Size
			if cur != nil && json.Unmarshal(payload, &sz) == nil {
				pty.Setsize(cur.ptmx, &pty.Winsize{Rows: sz.Rows, Cols: sz.Cols})
			}
		}
	}
}

type session struct {
	pid  int
	ptmx *os.File
}

// startSession runs s.Argv on a new pty, as the leader of its own session with the pty as its
// terminal, and copies its output to the host until it ends, then sends its exit code.
func (a *agent) startSession(w *lockedWriter, id uint64, s Session) (*session, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	if s.Rows > 0 && s.Cols > 0 {
		pty.Setsize(ptmx, &pty.Winsize{Rows: s.Rows, Cols: s.Cols})
	}
	pid, done, err := a.procs.start(s.Argv, []*os.File{tty, tty, tty}, &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0})
	if err != nil {
		ptmx.Close()
		return nil, err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 32<<10)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				w.frame(id, FrameData, buf[:n])
			}
			if err != nil { // EIO once every holder of the terminal closed it
				return
			}
		}
	}()
	go func() {
		ws := <-done
		select { // the rest of its output, unless a daemon it started keeps the terminal
		case <-copied:
		case <-time.After(time.Second):
		}
		ptmx.Close()
		w.exit(id, exitCode(ws))
	}()
	return &session{pid: pid, ptmx: ptmx}, nil
}

// hangUp ends a session as a terminal hang-up would.
func (s *session) hangUp() { _ = unix.Kill(-s.pid, unix.SIGHUP) }

// lockedWriter writes whole frames from several goroutines, those of the current session
// only: what an ended session still says is dropped.
type lockedWriter struct {
	mu  sync.Mutex
	f   *os.File
	cur uint64
}

func (w *lockedWriter) switchTo(id uint64) {
	w.mu.Lock()
	w.cur = id
	w.mu.Unlock()
}

func (w *lockedWriter) frame(id uint64, typ byte, payload []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id == w.cur {
		_ = WriteFrame(w.f, typ, payload)
	}
}

func (w *lockedWriter) exit(id uint64, code int) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(code))
	w.frame(id, FrameExit, b[:])
}
