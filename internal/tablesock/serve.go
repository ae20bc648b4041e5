package tablesock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/netdev"
	"golang.org/x/sys/unix"
)

// What one client may ask of a table server.
const (
	maxLine      = 1 << 20          // a longer request gets an error line, and its connection is closed
	maxConns     = 16               // connections beyond these get an error line and are closed
	writeTimeout = 10 * time.Second // a client that does not read its answers is dropped
)

var errTooLong = fmt.Errorf("the request is longer than %d bytes", maxLine)

// Reply is the answer to one request, on one line: ok, or the error; with what the operation
// returns (dataplane.TableReply: tables, entries or value).
type Reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	*dataplane.TableReply
}

// program is a node's program, with its tables (dataplane.UserProgram).
type program interface {
	Do(dataplane.TableRequest) (*dataplane.TableReply, error)
	Close()
}

// server answers the requests of one node's processes.
type server struct {
	uid   uint32                  // the only peer served: the node's root, as the host sees it
	open  func() (program, error) // the node's program now (a live reload swaps it)
	slots chan struct{}
}

// Main is the table server process: it reads its Config on stdin, listens in the node's
// network namespace, says "ok" on fd 3, and serves until the node's init ends or it is killed.
func Main() {
	ready := os.NewFile(3, "ready")
	var c Config
	var pidfd int
	s, ln, err := func() (*server, *net.UnixListener, error) {
		if err := json.NewDecoder(os.Stdin).Decode(&c); err != nil {
			return nil, nil, err
		}
		uid, err := rootUID(c.PID)
		if err != nil {
			return nil, nil, err
		}
		if pidfd, err = unix.PidfdOpen(c.PID, 0); err != nil {
			return nil, nil, fmt.Errorf("node init %d: %w", c.PID, err)
		}
		ln, err := listenIn(c.PID)
		return &server{uid: uid, open: c.open, slots: make(chan struct{}, maxConns)}, ln, err
	}()
	if err != nil {
		fmt.Fprintf(ready, "error: %v\n", err)
		os.Exit(1)
	}
	go func() { // the node's end is the server's
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if n, err := unix.Poll(fds, -1); n > 0 || (err != nil && err != unix.EINTR) {
				os.Exit(0)
			}
		}
	}()
	fmt.Fprint(ready, "ok\n")
	ready.Close()
	err = s.serve(ln)
	fmt.Fprintf(os.Stderr, "trellis table server of %s: %v\n", c.Node, err)
	os.Exit(1)
}

// rootUID returns the host uid of uid 0 of process pid's user namespace.
func rootUID(pid int) (uint32, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid))
	if err != nil {
		return 0, fmt.Errorf("node init %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "0" {
			uid, err := strconv.ParseUint(f[1], 10, 32)
			return uint32(uid), err
		}
	}
	return 0, fmt.Errorf("node init %d: its user namespace has no root", pid)
}

// listenIn listens on Name in the network namespace of process pid. The socket stays in that
// namespace; only this call's thread enters it, and ends with it.
func listenIn(pid int) (*net.UnixListener, error) {
	type result struct {
		ln  *net.UnixListener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, in the node's namespace, ends with this goroutine
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("entering the network namespace of node init %d: %w", pid, err)}
			return
		}
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: Name, Net: "unix"})
		if errors.Is(err, unix.EADDRINUSE) {
			err = fmt.Errorf("a process of the node holds %s already: end it, and run trellis up again", Name)
		}
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

// open opens the program on the node's ports now.
func (c Config) open() (program, error) {
	var ifindexes []int
	for _, name := range c.Ports {
		dev, err := netdev.ByName(name)
		if err != nil {
			return nil, err
		}
		if dev != nil {
			ifindexes = append(ifindexes, dev.Attrs().Index)
		}
	}
	u, err := dataplane.OpenUser(ifindexes)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, errors.New("no dataplane program runs on the node's ports now: trellis up attaches it")
	}
	return u, nil
}

// serve accepts connections until the listener fails.
func (s *server) serve(ln *net.UnixListener) error {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		select {
		case s.slots <- struct{}{}:
			go func() {
				defer func() { <-s.slots }()
				s.conn(c)
			}()
		default:
			go func() {
				defer c.Close()
				writeReply(c, Reply{Error: fmt.Sprintf("too many connections: at most %d at once", maxConns)})
			}()
		}
	}
}

// conn answers the requests of one connection, one line each, until it ends or sends one
// longer than maxLine.
func (s *server) conn(c *net.UnixConn) {
	defer c.Close()
	defer func() {
		if r := recover(); r != nil { // a request the server fails on ends its connection, not the server
			writeReply(c, Reply{Error: fmt.Sprintf("internal error: %v", r)})
		}
	}()
	refused := s.checkPeer(c) // answered to each request
	r := bufio.NewReader(c)
	for {
		line, err := readLine(r)
		if errors.Is(err, errTooLong) {
			writeReply(c, Reply{Error: err.Error()})
			return
		}
		if err != nil {
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		reply := Reply{Error: fmt.Sprint(refused)}
		if refused == nil {
			reply = s.handle(line)
		}
		if writeReply(c, reply) != nil {
			return
		}
	}
}

// checkPeer refuses a process that is not the node's root.
func (s *server) checkPeer(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	if cerr := raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); cerr != nil {
		return cerr
	}
	if err != nil {
		return err
	}
	if cred.Uid != s.uid {
		return errors.New("the table socket serves the node's root (uid 0) only")
	}
	return nil
}

// readLine reads one line of at most maxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxLine {
			return nil, errTooLong
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// handle answers one request.
func (s *server) handle(line []byte) Reply {
	var req dataplane.TableRequest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return Reply{Error: fmt.Sprintf("not a request (%v): send one JSON object per line, e.g. {\"op\":\"get\",\"table\":\"routes\",\"key\":\"0a000201\"}", err)}
	}
	p, err := s.open()
	if err != nil {
		return Reply{Error: err.Error()}
	}
	defer p.Close()
	out, err := p.Do(req)
	if err != nil {
		return Reply{Error: err.Error()}
	}
	return Reply{OK: true, TableReply: out}
}

// writeReply writes one answer, as one line.
func writeReply(c net.Conn, r Reply) error {
	data, _ := json.Marshal(r) // always marshals
	c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := c.Write(append(data, '\n'))
	return err
}
