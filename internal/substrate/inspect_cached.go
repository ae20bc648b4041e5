package substrate

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A Reader keeps, between inspects, what the nodes' namespaces hold (devices and addresses),
// for as long as netlink's notifications say no change: a server that answers inspect again
// and again reads of each node only its counters (/proc/PID/net/dev) and its cgroup.
type Reader struct {
	watch *rtnl.Watch
	cache *rtnl.Cache
}

// NewReader starts hearing the machine's namespaces' notifications.
func NewReader() (*Reader, error) {
	w, err := rtnl.NewWatch()
	if err != nil {
		return nil, err
	}
	return &Reader{watch: w, cache: rtnl.NewCache(w)}, nil
}

// sync reads the notifications of changes made so far.
func (r *Reader) sync() { r.watch.Sync() }

// Close stops hearing.
func (r *Reader) Close() error { return r.watch.Close() }

// interfaceInfos makes the interfaces of links and addrs, keeping in seen what links show of
// them: their counters from counters where it has them (by name), else from links.
func interfaceInfos(links []rtnl.Link, addrs []rtnl.Addr, counters map[string]rtnl.Stats, seen map[string]ifaceSeen) []InterfaceInfo {
	byIndex := map[int][]string{}
	for _, a := range addrs {
		byIndex[a.Index] = append(byIndex[a.Index], a.Prefix.String())
	}
	out := make([]InterfaceInfo, 0, len(links))
	for _, l := range links {
		out = append(out, InterfaceInfo{Name: l.Name, MAC: l.MAC.String(), MTU: l.MTU,
			State: netlink.LinkOperState(l.OperState).String(), Addresses: byIndex[l.Index]})
		st := l.Stats
		if c, ok := counters[l.Name]; ok {
			st = c
		}
		seen[l.Name] = ifaceSeen{MTU: l.MTU, Up: hasCarrier(l.Flags, l.OperState), Stats: &st}
	}
	return out
}

// DevCounters reads the counters of the devices of the network namespace of process pid from
// /proc/PID/net/dev.
func DevCounters(pid int) (map[string]rtnl.Stats, error) {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/net/dev", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("counters of process %d's devices: %w", pid, err)
	}
	defer unix.Close(fd)
	var b []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("counters of process %d's devices: %w", pid, err)
		}
		if n == 0 {
			break
		}
		b = append(b, buf[:n]...)
	}
	return parseNetDev(b), nil
}

// parseNetDev reads /proc/net/dev: after two lines of headings, a device a line, "name:"
// then receive bytes, packets, errors, drops, and four more, then transmit bytes, packets,
// errors, drops and four more.
func parseNetDev(b []byte) map[string]rtnl.Stats {
	out := map[string]rtnl.Stats{}
	lines := bytes.Split(b, []byte("\n"))
	for _, line := range lines[min(2, len(lines)):] {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 12 {
			continue
		}
		u := func(i int) uint64 { v, _ := strconv.ParseUint(string(f[i]), 10, 64); return v }
		out[string(bytes.TrimSpace(name))] = rtnl.Stats{RxBytes: u(0), RxPackets: u(1), RxDropped: u(3),
			TxBytes: u(8), TxPackets: u(9), TxDropped: u(11)}
	}
	return out
}

// nodeNsIDs returns the namespace id of each node whose ports' peers (its interfaces) are all
// in one namespace, as the root namespace's devs say.
func nodeNsIDs(p *plan.Plan, devs map[string]rtnl.Link) map[string]int {
	out := map[string]int{}
	mixed := map[string]bool{}
	for _, l := range p.Links {
		for _, port := range l.Ports {
			d, ok := devs[port.Name]
			if !ok || d.PeerNetNsID < 0 {
				mixed[port.Node] = true
				continue
			}
			if id, seen := out[port.Node]; seen && id != d.PeerNetNsID {
				mixed[port.Node] = true
			}
			out[port.Node] = d.PeerNetNsID
		}
	}
	for node := range mixed {
		delete(out, node)
	}
	return out
}
