package substrate

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/node"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// build holds what create has made so far.
type build struct {
	st  *state.Store
	rec *state.Record
	mu  sync.Mutex
	ns  map[string]*nodeNS // by node name
}

// create makes a whole network: nodes, then links, then the nodes' addresses and sysctls,
// then the nodes' start commands. Each step runs concurrently over its items.
func create(st *state.Store, rec *state.Record, log io.Writer) error {
	b := &build{st: st, rec: rec, ns: map[string]*nodeNS{}}
	defer b.close()
	p := rec.Plan
	steps := []struct {
		what string
		n    int
		f    func(i int) error
	}{
		{"nodes started", len(p.Nodes), func(i int) error { return b.startNode(p.Nodes[i]) }},
		{"links made", len(p.Links), func(i int) error { return b.makeLink(p.Links[i]) }},
		{"nodes configured", len(p.Nodes), func(i int) error { return b.configureNode(p.Nodes[i]) }},
	}
	for _, s := range steps {
		t0 := time.Now()
		if err := parallel(s.n, s.f); err != nil {
			return err
		}
		fmt.Fprintf(log, "%d %s in %.3fs\n", s.n, s.what, time.Since(t0).Seconds())
	}
	// Record the pids before running user commands, which may take long.
	if err := st.Save(rec); err != nil {
		return err
	}
	if err := os.MkdirAll(st.LogDir(p.Network), 0o755); err != nil {
		return err
	}
	return parallel(len(p.Nodes), func(i int) error { return b.runExec(p.Nodes[i]) })
}

func (b *build) close() {
	for _, n := range b.ns {
		n.Close()
	}
}

func (b *build) nodeNS(name string) *nodeNS {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ns[name]
}

func (b *build) startNode(n *spec.Node) error {
	cfg := node.Config{Hostname: n.Name}
	for _, f := range n.Files {
		cfg.Files = append(cfg.Files, node.File{Path: f.Path, Content: f.Content})
	}
	pid, err := node.Start(node.Marker(b.st.ID, b.rec.NetID, n.Name), cfg)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	ns, err := openNodeNS(pid)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rec.Nodes[n.Name] = pid
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	b.ns[n.Name] = ns
	return nil
}

// configureNode sets a node's sysctls, then brings its interfaces up with their addresses.
// Sysctls come first so that per-interface settings apply before traffic flows. Duplicate
// address detection is off on link interfaces unless the file says otherwise: addresses come
// from the topology, and detection would hold a router's IPv6 forwarding back for seconds.
func (b *build) configureNode(n *spec.Node) error {
	ns := b.nodeNS(n.Name)
	var ifaces []string
	noDAD := map[string]string{}
	for _, l := range b.rec.Plan.Links {
		for _, port := range l.Ports {
			if port.Node == n.Name {
				ifaces = append(ifaces, port.Ifname)
				noDAD["net/ipv6/conf/"+port.Ifname+"/accept_dad"] = "0" // slashes: names may hold dots
			}
		}
	}
	for _, values := range []map[string]string{noDAD, n.Sysctl} { // the file's last
		if err := ns.sysctl(values); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, ifname := range ifaces {
		if err := ns.configureInterface(ifname, n.Addresses[ifname]); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if err := ns.addAddresses("lo", n.Addresses["lo"]); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// runExec runs a node's start commands in order, each through /bin/sh, with their output in
// the network's log directory. A command that fails stops `up` and is named in the error.
func (b *build) runExec(n *spec.Node) error {
	if len(n.Exec) == 0 {
		return nil
	}
	logPath := filepath.Join(b.st.LogDir(b.rec.Name), n.Name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	for i, line := range n.Exec {
		fmt.Fprintf(logFile, "$ %s\n", line)
		cmd, err := node.Command(b.rec.Nodes[n.Name], "/bin/sh", "-c", line)
		if err != nil {
			return err
		}
		// A file, not a pipe: a daemon started here keeps its output open, and Wait must not
		// wait for that.
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("node %s: exec[%d] %q failed (%v); its output:\n%s", n.Name, i, line, err, tail(logPath, 10))
		}
	}
	return nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
