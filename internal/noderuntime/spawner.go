package noderuntime

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/noderuntime/nodeinit"
	"golang.org/x/sys/unix"
)

// Node inits are started by the spawner (nodeinit.SpawnerArg0): a small process, started from
// the init program, that forks each init from its own small address space instead of trellis's
// large one. One spawner serves every Start of a trellis process at a time; it is started when
// a node starts and ends spawnerIdle after the last Start (or with trellis).

// spawnerIdle is how long a spawner with nothing to do is kept.
const spawnerIdle = 2 * time.Second

// ErrSpawner is returned when the spawner cannot be started or ends before it answers.
var ErrSpawner = errors.New("node spawner")

// spawner is a running spawner and the requests it has not answered.
type spawner struct {
	conn *net.UnixConn
	cmd  *exec.Cmd
	busy int // Starts using it (guarded by spawnMu)

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan nodeinit.SpawnReply
	err     error // set once it ended
}

var (
	spawnMu sync.Mutex
	current *spawner // nil: none running
)

// spawn has the spawner start one init: files are the init's configuration pipe (read end),
// its ready pipe (write end) and, on cgroup v2, its group's directory (req.Cgroup).
func spawn(req nodeinit.SpawnRequest, files []*os.File) (int, error) {
	s, err := acquire()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrSpawner, err)
	}
	defer release(s)
	r, err := s.call(req, files)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrSpawner, err)
	}
	if r.Err != "" {
		return 0, errors.New(r.Err)
	}
	return r.PID, nil
}

// acquire returns the running spawner, starting one if there is none.
func acquire() (*spawner, error) {
	spawnMu.Lock()
	defer spawnMu.Unlock()
	if current != nil && current.failed() != nil {
		current = nil
	}
	if current == nil {
		s, err := startSpawner()
		if err != nil {
			return nil, err
		}
		current = s
	}
	current.busy++
	return current, nil
}

// release ends a use of s; the spawner ends once it has had nothing to do for spawnerIdle.
func release(s *spawner) {
	spawnMu.Lock()
	defer spawnMu.Unlock()
	s.busy--
	if s.busy > 0 {
		return
	}
	time.AfterFunc(spawnerIdle, func() {
		spawnMu.Lock()
		defer spawnMu.Unlock()
		if s.busy == 0 {
			if current == s {
				current = nil
			}
			s.conn.Close() // the spawner reads the end of the stream and exits
		}
	})
}

// startSpawner starts a spawner from the init program, with its end of a socket pair and the
// programs a node's init runs (the init program, then pid1: nodeinit.SpawnerArg0).
func startSpawner() (*spawner, error) {
	exe, err := initFile()
	if err != nil {
		return nil, err
	}
	pid1, err := pid1File()
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "spawner"), os.NewFile(uintptr(fds[1]), "spawner")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/fd/4", // exe, in the child
		Args:       []string{nodeinit.SpawnerArg0},
		ExtraFiles: []*os.File{theirs, exe, pid1}, // fds 3, 4 and 5
		Stderr:     os.Stderr,
		Env:        []string{"GOMAXPROCS=2"},
	}
	if err := cmd.Start(); err != nil {
		c.Close()
		return nil, fmt.Errorf("starting: %w", err)
	}
	s := &spawner{conn: c.(*net.UnixConn), cmd: cmd, pending: map[uint64]chan nodeinit.SpawnReply{}}
	go s.read()
	return s, nil
}

// failed returns why s ended, or nil while it runs.
func (s *spawner) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// call sends one request and waits for its reply.
func (s *spawner) call(req nodeinit.SpawnRequest, files []*os.File) (nodeinit.SpawnReply, error) {
	ch := make(chan nodeinit.SpawnReply, 1)
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nodeinit.SpawnReply{}, s.err
	}
	s.next++
	req.ID = s.next
	s.pending[req.ID] = ch
	s.mu.Unlock()
	data, err := json.Marshal(req)
	if err == nil {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		_, _, err = s.conn.WriteMsgUnix(data, unix.UnixRights(fds...), nil)
	}
	if err != nil {
		s.mu.Lock()
		delete(s.pending, req.ID)
		s.mu.Unlock()
		return nodeinit.SpawnReply{}, err
	}
	r, ok := <-ch
	if !ok {
		return r, s.failed()
	}
	return r, nil
}

// read hands each reply to its request until the spawner ends; then it fails the requests
// left and reaps the spawner.
func (s *spawner) read() {
	buf := make([]byte, nodeinit.MaxSpawnMessage)
	var err error
	for {
		var n int
		n, _, _, _, err = s.conn.ReadMsgUnix(buf, nil)
		if err == nil && n == 0 {
			err = errors.New("it exited")
		}
		if err != nil {
			break
		}
		var r nodeinit.SpawnReply
		if json.Unmarshal(buf[:n], &r) != nil {
			continue
		}
		s.mu.Lock()
		ch := s.pending[r.ID]
		delete(s.pending, r.ID)
		s.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	s.mu.Lock()
	s.err = fmt.Errorf("ended: %w", err)
	for id, ch := range s.pending {
		close(ch)
		delete(s.pending, id)
	}
	s.mu.Unlock()
	s.conn.Close()
	s.cmd.Wait()
}
