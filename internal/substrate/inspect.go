package substrate

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
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
	Port      string `json:"port"`
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

// Inspect reads network name's nodes, interfaces and links from the kernel.
func Inspect(st *state.Store, name string) (*NetworkInfo, error) {
	rec, err := st.Load(name)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("%w %s in %s", ErrNoNetwork, name, st.Dir)
	}
	env := &kinds.Env{Store: st, Plan: rec.Plan}
	found, err := runningNodes(env)
	if err != nil {
		return nil, err
	}
	running := map[string]int{}
	for name, in := range found {
		running[name] = in.PID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info := &NetworkInfo{Name: rec.Name, NetID: rec.NetID, Host: rec.Plan.Host, Tunnel: rec.Plan.Tunnel, Status: rec.Status, File: rec.File}
	seen := map[string]*netlink.LinkAttrs{} // node interfaces by node:ifname
	for _, n := range rec.Plan.Nodes {
		ni := NodeInfo{Name: n.Name, Kind: n.Kind, PID: running[n.Name], Running: running[n.Name] != 0}
		if ni.Running {
			if k, _ := kinds.NodeKind(n.Kind); k != nil {
				describe(ctx, env, k, found[n.Name], &ni, seen)
			}
			ni.Usage = usage(env, found[n.Name])
		}
		info.Nodes = append(info.Nodes, ni)
	}
	devs, drops, err := substrateDevices(rec.NetID)
	if err != nil {
		return nil, err
	}
	for i, n := range rec.Plan.Nodes {
		info.Nodes[i].Engines = enginesInfo(st, rec.NetID, n, devs)
	}
	for _, l := range rec.Plan.Links {
		li := LinkInfo{Name: l.Name, Connector: l.Connector, MTU: l.MTU, State: stateWord(l.Down)}
		if devs[l.Device] != nil {
			li.Bridge = l.Device
		}
		if l.Rate > 0 {
			li.Rate = spec.FormatRate(l.Rate)
		}
		for _, p := range l.Ports {
			ei := EndpointInfo{Node: p.Node, Interface: p.Ifname, Port: p.Name, State: "missing"}
			dev := devs[p.Name]
			if dev != nil {
				ei.State = stateWord(dev.Attrs().Flags&net.FlagUp == 0)
				ei.Drops = drops[dev.Attrs().Index]
			}
			if !p.Impair.IsZero() {
				ei.Impairment = impairText(p.Impair)
				if dev != nil {
					if c, err := dataplane.ReadImpairCounters(dev.Attrs().Index); err == nil {
						ei.ImpairDrops, ei.Duplicated, ei.Corrupted = c.Dropped, c.Duplicated, c.Corrupted
					}
				}
			}
			if a := seen[p.Node+":"+p.Ifname]; a != nil {
				li.MTU = a.MTU
				if s := a.Statistics; s != nil {
					ei.TxPackets, ei.TxBytes, ei.RxPackets, ei.RxBytes = s.TxPackets, s.TxBytes, s.RxPackets, s.RxBytes
				}
			}
			li.Endpoints = append(li.Endpoints, ei)
		}
		for _, t := range l.Tunnels {
			li.Tunnels = append(li.Tunnels, TunnelInfo{Host: t.Host, Remote: t.Remote.String(), Key: t.Key, Device: t.Device})
		}
		li.LAN = lanInfo(l, devs)
		info.Links = append(info.Links, li)
	}
	if tk, err := kinds.TunnelKind(rec.Plan.Tunnel); err == nil {
		if c, ok := tk.(interface {
			Counters(*kinds.Env) *dataplane.EGRECounters
		}); ok {
			info.EGRE = c.Counters(env)
		}
	}
	return info, nil
}

// describe fills in a running node's interfaces (and for a Describer its threads and notes),
// keeping the interfaces' attributes in seen.
func describe(ctx context.Context, env *kinds.Env, k kinds.Node, in kinds.Instance, ni *NodeInfo, seen map[string]*netlink.LinkAttrs) {
	d, ok := k.(kinds.Describer)
	if !ok {
		ni.Interfaces = interfaces(in.PID, ni.Name, seen)
		return
	}
	detail, err := d.Describe(ctx, env, in)
	ni.Threads, ni.Notes = detail.Threads, detail.Notes
	if err != nil {
		ni.Notes = append(ni.Notes, err.Error())
	}
	for i := range detail.Interfaces {
		ifc := &detail.Interfaces[i]
		ni.Interfaces = append(ni.Interfaces, InterfaceInfo{Name: ifc.Name, MAC: ifc.HardwareAddr.String(), MTU: ifc.MTU,
			State: ifc.OperState.String(), Addresses: ifc.Addresses})
		seen[ni.Name+":"+ifc.Name] = &ifc.LinkAttrs
	}
}

// interfaces lists a node's interfaces, and keeps their attributes in seen.
func interfaces(pid int, nodeName string, seen map[string]*netlink.LinkAttrs) []InterfaceInfo {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return nil
	}
	defer ns.Close()
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil
	}
	defer nl.Close()
	links, err := nl.LinkList()
	if err != nil {
		return nil
	}
	var out []InterfaceInfo
	for _, l := range links {
		a := l.Attrs()
		ii := InterfaceInfo{Name: a.Name, MAC: a.HardwareAddr.String(), MTU: a.MTU, State: a.OperState.String()}
		if addrs, err := nl.AddrList(l, netlink.FAMILY_ALL); err == nil {
			for _, ad := range addrs {
				ii.Addresses = append(ii.Addresses, ad.IPNet.String())
			}
		}
		seen[nodeName+":"+a.Name] = a
		out = append(out, ii)
	}
	return out
}

// substrateDevices lists network netID's substrate devices by name, and the frames each
// device's shaper dropped by ifindex: one dump of each, whatever the size of the network.
func substrateDevices(netID string) (map[string]netlink.Link, map[int]uint64, error) {
	links, err := devicesOf(netID)
	if err != nil {
		return nil, nil, err
	}
	devs := make(map[string]netlink.Link, len(links))
	for _, l := range links {
		devs[l.Attrs().Name] = l
	}
	drops := map[int]uint64{}
	qdiscs, err := netlink.QdiscList(nil)
	if err != nil {
		return devs, drops, nil // counters are for show: the network is there all the same
	}
	for _, q := range qdiscs {
		if tbf, ok := q.(*netlink.Tbf); ok && tbf.Statistics != nil {
			drops[tbf.LinkIndex] = uint64(tbf.Statistics.Queue.Drops)
		}
	}
	return devs, drops, nil
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
