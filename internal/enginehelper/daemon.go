package enginehelper

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Main is the helper process of one node's engines. It reads its Config on stdin, makes the
// FEs, attaches the programs, mirrors the control node, says "ok" on fd 3, then keeps
// mirroring until the control node's init ends. It never returns.
func Main() {
	ready := os.NewFile(3, "ready")
	var c Config
	err := json.NewDecoder(os.Stdin).Decode(&c)
	if len(os.Args) > 1 {
		c.stateID = os.Args[1] // Marker
	}
	var h *helper
	if err == nil && c.Control == 0 && len(c.Here) > 0 {
		err = hold(c, ready) // never returns when it works
	}
	if err == nil {
		h, err = start(c)
	}
	if err != nil {
		fmt.Fprintf(ready, "error: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprint(ready, "ok\n")
	ready.Close()
	h.serve()
	os.Exit(0)
}

// helper is the running state of Main.
type helper struct {
	c      Config
	pidfd  int
	fes    []*fe
	dp     *dataplane.Engines
	m      *mirror
	done   chan struct{}
	status string
	live   []bool // the engines the classifier was last configured with
}

// start makes the FEs, loads and attaches the programs and starts the mirror.
func start(c Config) (*helper, error) {
	if len(c.Engines) == 0 || len(c.Engines) > dataplane.MaxEngineFEs {
		return nil, fmt.Errorf("%w: %d engines", ErrConfig, len(c.Engines))
	}
	pidfd, err := unix.PidfdOpen(c.Control, 0)
	if err != nil {
		return nil, fmt.Errorf("%w %s (pid %d): %v", ErrControl, c.Node, c.Control, err)
	}
	if c.VM {
		return startVM(c, pidfd)
	}
	h := &helper{c: c, pidfd: pidfd, done: make(chan struct{}), status: StatusPath(c.StateDir, c.NetID, c.Node)}
	control, err := netns.GetFromPid(c.Control)
	if err != nil {
		return nil, fmt.Errorf("%w %s: network namespace: %v", ErrControl, c.Node, err)
	}
	cnl, err := netlink.NewHandleAt(control)
	if err != nil {
		return nil, fmt.Errorf("%w %s: netlink: %v", ErrControl, c.Node, err)
	}
	for i := range c.Engines {
		make := makeFE
		if c.remote(i) {
			make = makeRemoteFE
		}
		f, err := make(c, i)
		if err != nil {
			return nil, err
		}
		if f.remote != nil {
			f.dial() // a holder not there yet is dialled again by serve
		}
		h.fes = append(h.fes, f)
	}
	if h.dp, err = dataplane.LoadEngines(); err != nil {
		return nil, err
	}
	h.m = &mirror{control: control, cnl: cnl, fes: h.fes, dp: h.dp, names: map[int]string{}, applied: map[string]uint64{},
		resync: make(chan struct{}, 1)}
	stop := make(chan struct{})
	sub, err := h.m.watch(stop)
	if err != nil {
		return nil, fmt.Errorf("mirroring %s: %w", c.Node, err)
	}
	if err := h.attach(); err != nil {
		return nil, err
	}
	go h.m.run(h.done, sub, stop)
	if err := os.MkdirAll(filepath.Dir(h.status), state.DirMode); err != nil {
		return nil, err
	}
	return h, h.writeStatus()
}

// attach configures the classifier's table and ports, puts the dispatcher on every FE end and
// the classifier on every port of the node: transit frames start going to the FEs.
func (h *helper) attach() error {
	if err := h.configure(); err != nil {
		return err
	}
	if err := h.dp.Alive(aliveFor); err != nil {
		return err
	}
	for _, in := range h.c.Ifaces {
		port, err := netlink.LinkByName(in.Port)
		if err != nil {
			return fmt.Errorf("port %s of %s: %w", in.Port, in.Name, err)
		}
		fes := make([]int, len(h.fes))
		for i, f := range h.fes {
			fes[i] = f.ports[in.Name]
			if err := h.dp.AttachDispatcher(fes[i]); err != nil {
				return err
			}
		}
		if err := h.dp.SetPort(port.Attrs().Index, fes); err != nil {
			return err
		}
		if err := h.dp.SetRate(port.Attrs().Index, in.Rate, in.MTU); err != nil {
			return err
		}
		if err := h.dp.AttachClassifier(port.Attrs().Index); err != nil {
			return err
		}
	}
	return nil
}

// aliveFor is how long the classifier takes the FEs as there after the helper last said so;
// the helper says so four times a second, so a helper killed (or stopped) sends the node's
// transit frames back to the node itself within aliveFor.
const aliveFor = 2 * time.Second

// serve says the FEs are alive and writes the status, every quarter of a second, until the
// control node's init ends.
func (h *helper) serve() {
	fds := []unix.PollFd{{Fd: int32(h.pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 250)
		if n > 0 || (err != nil && err != unix.EINTR) {
			close(h.done)
			return // the control node is gone: so are its ports; the FEs go with this process
		}
		h.dp.Alive(aliveFor)
		h.tendRemotes()
		h.tendVMs()
		if err := h.configure(); err != nil {
			h.m.failed(err)
		}
		h.writeStatus()
	}
}

// writeStatus writes the status file if it changed.
func (h *helper) writeStatus() error {
	s := Status{PID: os.Getpid(), Mirror: h.m.status()}
	counts, err := h.dp.Counts()
	if err != nil {
		return err
	}
	for i := range h.fes {
		es := EngineStatus{Index: i, Ports: map[string]string{}, Classified: counts[i], CPUs: h.c.Engines[i].CPUs, Share: h.c.Engines[i].Share}
		if f := h.fes[i]; f.vm {
			es.VM, es.Down = true, !f.alive()
		} else if f.remote != nil {
			es.Host, es.Down = h.c.Engines[i].Host, !f.remote.synced.Load()
		}
		for _, in := range h.c.Ifaces {
			es.Ports[in.Name] = in.FEPorts[i]
		}
		s.Engines = append(s.Engines, es)
	}
	s.Control = counts[dataplane.MaxEngineFEs]
	if s.Policed, err = h.dp.Policed(); err != nil {
		return err
	}
	if old, err := ReadStatus(h.c.StateDir, h.c.NetID, h.c.Node); err == nil && old != nil && reflect.DeepEqual(*old, s) {
		return nil
	}
	data, _ := json.MarshalIndent(s, "", "  ")
	tmp := h.status + ".tmp"
	if err := os.WriteFile(tmp, data, state.FileMode); err != nil {
		return err
	}
	return os.Rename(tmp, h.status)
}
