package substrate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"golang.org/x/sys/unix"
)

// NetworkInfo is what `trellis inspect` shows of a network, read live from the kernel.
type NetworkInfo struct {
	Name   string     `json:"name"`
	NetID  string     `json:"netid"`
	Host   string     `json:"host,omitempty"`   // this machine, for a network over several
	Tunnel string     `json:"tunnel,omitempty"` // egre or vxlan, for a network over several
	Status string     `json:"status"`
	File   string     `json:"file"`
	Nodes  []NodeInfo `json:"nodes"`
	Links  []LinkInfo `json:"links"`
	// EGRE counts what the machine's decapsulation program did, for all its networks.
	EGRE *dataplane.EGRECounters `json:"egre,omitempty"`
}

// NodeInfo describes one node.
type NodeInfo struct {
	Name       string          `json:"name"`
	Kind       string          `json:"kind"`
	PID        int             `json:"pid"`
	Running    bool            `json:"running"`
	Interfaces []InterfaceInfo `json:"interfaces"`
	// Usage is what the node uses (CPU time, memory, processes), for kinds that tell it.
	Usage *kinds.Usage `json:"usage,omitempty"`
	// A VM's QEMU threads (their CPUs, policies and priorities) and notes such as its
	// acceleration.
	Threads []kinds.Thread `json:"threads,omitempty"`
	Notes   []string       `json:"notes,omitempty"`
	Engines *EnginesInfo   `json:"engines,omitempty"` // a node with forwarding engines
}

// InterfaceInfo describes a virtual interface as the node sees it.
type InterfaceInfo struct {
	Name      string   `json:"name"`
	MAC       string   `json:"mac"`
	MTU       int      `json:"mtu"`
	State     string   `json:"state"`
	Addresses []string `json:"addresses"`
}

// LinkInfo describes a virtual link and its traffic.
type LinkInfo struct {
	Name      string         `json:"name"`
	Connector string         `json:"connector"`
	Rate      string         `json:"rate"` // "" when uncapped
	MTU       int            `json:"mtu"`
	State     string         `json:"state"` // up, or down (no carrier)
	Bridge    string         `json:"bridge,omitempty"`
	Endpoints []EndpointInfo `json:"endpoints"`
	Tunnels   []TunnelInfo   `json:"tunnels,omitempty"`
	LAN       *LANInfo       `json:"lan,omitempty"` // the learnt table of a lan connector
}

// TunnelInfo describes how a link reaches one other machine.
type TunnelInfo struct {
	Host   string `json:"host"`
	Remote string `json:"remote"`
	Key    uint32 `json:"key"` // GRE key; VXLAN VNI is its low 24 bits
	Device string `json:"device"`
}

// EndpointInfo counts what a node sent into and received from a link.
type EndpointInfo struct {
	Node      string `json:"node"`
	Interface string `json:"interface"`
	Port      string `json:"port"` // the substrate port; "" on a direct link (none)
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	Drops     uint64 `json:"drops"` // dropped by the port's shaper
	State     string `json:"state"` // the port's carrier: up or down
	// Impairment of the frames the interface sends, as the file writes it, and what it did.
	Impairment  string `json:"impairment,omitempty"`
	ImpairDrops uint64 `json:"impair_drops,omitempty"`
	Duplicated  uint64 `json:"duplicated,omitempty"`
	Corrupted   uint64 `json:"corrupted,omitempty"`
}

// Inspect reads network name's nodes, interfaces and links from the kernel: one dump of the
// machine's devices and one of its qdiscs, and for each running node a dump of its devices
// and one of its addresses, from a socket in its namespace, a few nodes at a time.
func Inspect(st *state.Store, name string) (*NetworkInfo, error) {
	return InspectWith(st, name, nil)
}

// InspectWith is Inspect through rd's cache of the nodes' devices and addresses (none if rd
// is nil).
func InspectWith(st *state.Store, name string, rd *Reader) (*NetworkInfo, error) {
	rec, err := st.LoadShared(name) // inspect changes nothing
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("%w %s in %s", ErrNoNetwork, name, st.Dir)
	}
	if rd != nil {
		rd.sync() // before anything is read: every change made so far is heard
	}
	var root rootDevices
	var rootErr error
	var wg sync.WaitGroup
	wg.Go(func() { root, rootErr = readRootDevices(shaped(rec.Plan)) })
	found, err := Running(st, rec.Plan)
	if err != nil {
		wg.Wait()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env := &kinds.Env{Store: st, Plan: rec.Plan}
	info := &NetworkInfo{Name: rec.Name, NetID: rec.NetID, Host: rec.Plan.Host, Tunnel: rec.Plan.Tunnel, Status: rec.Status, File: rec.File}
	var seen map[string]ifaceSeen
	info.Nodes, seen = readNodes(ctx, env, rec.Plan, found, rd, func() map[string]int {
		wg.Wait()
		if rd == nil || rootErr != nil {
			return nil
		}
		return nodeNsIDs(rec.Plan, root.devs)
	})
	wg.Wait()
	if rootErr != nil {
		return nil, rootErr
	}
	for i, n := range rec.Plan.Nodes {
		info.Nodes[i].Engines = enginesInfo(st, rec.NetID, n, root.devs)
	}
	ports, err := portDevices(rec.NetID, rec.Plan, root)
	if err != nil {
		return nil, err
	}
	defer ports.in.close()
	err = ports.in.do(func() error { // impairment counters are read where the ports are
		for _, l := range rec.Plan.Links {
			info.Links = append(info.Links, linkInfo(l, ports.devs, seen))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	pids := map[string]int{}
	for _, n := range info.Nodes {
		pids[n.Name] = n.PID
	}
	for i, l := range rec.Plan.Links {
		directImpairCounters(l, &info.Links[i], pids)
	}
	if tk, err := kinds.TunnelKind(rec.Plan.Tunnel); err == nil {
		if c, ok := tk.(kinds.Counter); ok {
			info.EGRE = c.Counters(env)
		}
	}
	return info, nil
}

// linkInfo describes link l from the machine's devices and its endpoints' interfaces as their
// nodes see them (seen, by "node:interface").
func linkInfo(l *plan.Link, root rootDevices, seen map[string]ifaceSeen) LinkInfo {
	li := LinkInfo{Name: l.Name, Connector: l.Connector, MTU: l.MTU, State: stateWord(l.Down)}
	if _, ok := root.devs[l.Device]; ok {
		li.Bridge = l.Device
	}
	if l.Rate > 0 {
		li.Rate = spec.FormatRate(l.Rate)
	}
	direct := Wired(l)
	for _, p := range l.Ports {
		ei := EndpointInfo{Node: p.Node, Interface: p.Ifname, Port: p.Name, State: "missing"}
		if direct { // no port: the state is the node's interface's
			ei.Port = ""
			if a, ok := seen[p.Node+":"+p.Ifname]; ok {
				ei.State = stateWord(!a.Up)
			}
		}
		dev, ok := root.devs[p.Name]
		if ok {
			ei.State = stateWord(dev.Flags&unix.IFF_UP == 0)
			ei.Drops = root.shaperDrops[dev.Index]
		}
		if !p.Impair.IsZero() {
			ei.Impairment = impairText(p.Impair)
			if ok {
				if c, err := dataplane.ReadImpairCounters(dev.Index); err == nil {
					ei.ImpairDrops, ei.Duplicated, ei.Corrupted = c.Dropped, c.Duplicated, c.Corrupted
				}
			}
		}
		if a, ok := seen[p.Node+":"+p.Ifname]; ok {
			li.MTU = a.MTU
			if s := a.Stats; s != nil {
				ei.TxPackets, ei.TxBytes, ei.RxPackets, ei.RxBytes = s.TxPackets, s.TxBytes, s.RxPackets, s.RxBytes
			}
		}
		li.Endpoints = append(li.Endpoints, ei)
	}
	for _, t := range l.Tunnels {
		li.Tunnels = append(li.Tunnels, TunnelInfo{Host: t.Host, Remote: t.Remote.String(), Key: t.Key, Device: t.Device})
	}
	li.LAN = lanInfo(l, root.devs)
	return li
}

// rootDevices are the devices of the machine's root namespace by name, and the frames each
// device's shaper (tbf) dropped, by device index.
type rootDevices struct {
	devs        map[string]rtnl.Link
	shaperDrops map[int]uint64
}

// shaped tells whether a link of plan p has a rate cap (a shaper on its ports).
func shaped(p *plan.Plan) bool {
	for _, l := range p.Links {
		if l.Rate > 0 {
			return true
		}
	}
	return false
}

// readRootDevices reads the root namespace's devices and, if withShapers, the shapers' drops:
// one dump of each, whatever the size of the networks.
func readRootDevices(withShapers bool) (rootDevices, error) {
	conn, err := rtnl.Dial()
	if err != nil {
		return rootDevices{}, err
	}
	defer conn.Close()
	links, err := conn.Links(rtnl.Own)
	if err != nil {
		return rootDevices{}, err
	}
	r := rootDevices{devs: make(map[string]rtnl.Link, len(links))}
	for _, l := range links {
		r.devs[l.Name] = l
	}
	r.shaperDrops = map[int]uint64{}
	if withShapers {
		if drops, err := conn.QdiscDrops("tbf"); err == nil { // counters are for show: the network is there all the same
			r.shaperDrops = drops
		}
	}
	return r, nil
}

// usage asks a node's kind what the node uses, if the kind can tell; nil otherwise.
func usage(env *kinds.Env, in kinds.Instance) *kinds.Usage {
	k, err := kinds.NodeKind(in.Kind)
	m, ok := k.(kinds.Measurer)
	if err != nil || !ok {
		return nil
	}
	u, err := m.Usage(env, in)
	if err != nil {
		return nil // gone meanwhile
	}
	return &u
}
