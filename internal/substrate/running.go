package substrate

import (
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
	"golang.org/x/sys/unix"
)

// The node kinds find running nodes by reading every process's command line in /proc, which
// takes longer than anything else inspect or a scrape does on a machine of a thousand nodes.
// For showing nodes (not for changing them), Running keeps what it found with a pidfd of each
// node's first process: while every node of the plan has one and none of those processes has
// ended, a new scan would find the same processes (a node has one first process, and a node
// started again is a new one), so none is needed.

// liveNodes is what Running found of one network.
type liveNodes struct {
	found map[string]kinds.Instance
	fds   []int // pidfds of found's processes
	used  time.Time
}

var live = struct {
	sync.Mutex
	nets map[string]*liveNodes // by state directory and network id
	fds  int                   // pidfds held, at most maxLiveFDs
}{nets: map[string]*liveNodes{}}

// maxLiveFDs bounds the pidfds Running holds: a quarter of the process's file limit.
var maxLiveFDs = sync.OnceValue(func() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < 1024 {
		return 256
	}
	return int(min(rl.Cur/4, 1<<16))
})

// Running returns the nodes of the network of plan p (state directory st) that run, by name,
// as the node kinds find them. It is for showing nodes (inspect, metrics): the instances'
// digests are those of the last scan, so the reconciler asks the kinds itself.
func Running(st *state.Store, p *plan.Plan) (map[string]kinds.Instance, error) {
	key := st.Dir + "\x00" + p.NetID
	live.Lock()
	if e := live.nets[key]; e != nil {
		if covers(e.found, p) && allAlive(e.fds) {
			e.used = time.Now()
			found := maps.Clone(e.found)
			live.Unlock()
			return found, nil
		}
		forget(key)
	}
	live.Unlock()
	found, err := runningNodes(&kinds.Env{Store: st, Plan: p})
	if err != nil || !covers(found, p) {
		return found, err // a network with nodes down is scanned each time
	}
	e := &liveNodes{found: found, used: time.Now()}
	for _, in := range found {
		fd, err := unix.PidfdOpen(in.PID, 0)
		if err != nil { // ended meanwhile
			closeAll(e.fds)
			return found, nil
		}
		e.fds = append(e.fds, fd)
	}
	live.Lock()
	defer live.Unlock()
	if old := live.nets[key]; old != nil {
		forget(key)
	}
	for live.fds+len(e.fds) > maxLiveFDs() && evictOldest() {
	}
	if live.fds+len(e.fds) > maxLiveFDs() {
		closeAll(e.fds)
		return found, nil
	}
	live.nets[key], live.fds = e, live.fds+len(e.fds)
	return maps.Clone(found), nil
}

// covers tells whether every node of p is in found.
func covers(found map[string]kinds.Instance, p *plan.Plan) bool {
	for _, n := range p.Nodes {
		if _, ok := found[n.Name]; !ok {
			return false
		}
	}
	return true
}

// allAlive tells whether none of the processes of pidfds has ended: one poll for all.
func allAlive(pidfds []int) bool {
	pfds := make([]unix.PollFd, len(pidfds))
	for i, fd := range pidfds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for {
		n, err := unix.Poll(pfds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n == 0
	}
}

// forget drops the network of key, with live locked.
func forget(key string) {
	e := live.nets[key]
	closeAll(e.fds)
	live.fds -= len(e.fds)
	delete(live.nets, key)
}

// evictOldest drops the network used longest ago, with live locked; false if there is none.
func evictOldest() bool {
	oldest := ""
	for k, e := range live.nets {
		if oldest == "" || e.used.Before(live.nets[oldest].used) {
			oldest = k
		}
	}
	if oldest != "" {
		forget(oldest)
	}
	return oldest != ""
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
