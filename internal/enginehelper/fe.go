package enginehelper

import (
	"fmt"
	"math/big"
	"net"
	"strings"
	"syscall"

	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// fe is one forwarding engine: a network namespace held by the helper, with a copy of each of
// the node's link interfaces.
type fe struct {
	index int
	ns    netns.NsHandle
	nl    *netlink.Handle
	links map[string]int // interface name -> ifindex inside the FE
	ports map[string]int // interface name -> ifindex of its substrate end
	work  chan func()    // the mirror's changes for this FE, applied in order by one goroutine
	rt    *rtSock        // route changes in batches
	ops   feOps          // what the mirror changes in it: here, or through the remote holder
	// remote, for an FE on another machine: its connection; nil for one held here. Such an FE
	// has no namespace here (ns is -1), and links come from its holder.
	remote *remoteFE
	// vm, for an engine of a VM node: its VM's taps are its substrate ends (vmfe.go); vmUp
	// says they were all there at the last look.
	vm, vmUp bool
}

// alive tells whether the FE may take frames: held here, a remote one connected and copied,
// or a VM whose taps are there and whose agent has the control VM's routes.
func (f *fe) alive() bool {
	switch {
	case f.vm:
		return f.vmUp && f.remote.synced.Load()
	case f.remote != nil:
		return f.remote.synced.Load()
	}
	return true
}

// feOps are the changes the mirror makes in an FE.
type feOps interface {
	AddrReplace(link netlink.Link, a *netlink.Addr) error
	AddrDel(link netlink.Link, a *netlink.Addr) error
	NeighSet(n *netlink.Neigh) error
	NeighDel(n *netlink.Neigh) error
	send(changes []rtChange) (map[int]syscall.Errno, error)
	dump() ([]*rtMsg, error)
}

// localOps changes an FE held by this process.
type localOps struct {
	*netlink.Handle
	*rtSock
}

func (f *fe) close() {
	if f.remote != nil {
		f.remote.close()
	}
	if f.rt != nil {
		f.rt.close()
	}
	if f.nl != nil {
		f.nl.Close()
	}
	if f.ns.IsOpen() {
		f.ns.Close()
	}
}

// makeFE makes engine i of configuration c: its namespace, a veth pair per interface (the copy
// inside with the node's name, MAC and MTU; the substrate end up, without IPv6), its sysctls
// and receive steering onto its CPUs.
func makeFE(c Config, i int) (*fe, error) {
	ns, err := netnsutil.New()
	if err != nil {
		return nil, err
	}
	f := &fe{index: i, ns: ns, links: map[string]int{}, ports: map[string]int{}}
	if f.nl, err = netlink.NewHandleAt(ns); err != nil {
		f.close()
		return nil, fmt.Errorf("FE %d: netlink: %w", i, err)
	}
	if f.rt, err = openRtSock(ns); err != nil {
		f.close()
		return nil, fmt.Errorf("FE %d: %w", i, err)
	}
	if err := f.setup(c); err != nil {
		f.close()
		return nil, fmt.Errorf("FE %d: %w", i, err)
	}
	f.ops = localOps{f.nl, f.rt}
	f.startWork()
	return f, nil
}

// startWork starts the goroutine that applies the FE's changes in order.
func (f *fe) startWork() {
	f.work = make(chan func(), 1)
	go func() {
		for w := range f.work {
			w()
		}
	}()
}

func (f *fe) setup(c Config) error {
	values := map[string]string{}
	for k, v := range plan.FESysctls {
		values[k] = v
	}
	for _, in := range c.Ifaces {
		if err := f.addIface(c, in); err != nil {
			return err
		}
		values["net/ipv6/conf/"+in.Name+"/accept_dad"] = "0"
		values["net/ipv4/conf/"+in.Name+"/send_redirects"] = "0"
	}
	for k, v := range c.Sysctl {
		values[k] = v
	}
	if err := netnsutil.Sysctl(f.ns, values); err != nil {
		return err
	}
	lo, err := f.nl.LinkByName("lo")
	if err == nil {
		err = f.nl.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	for _, in := range c.Ifaces {
		dev, err := f.nl.LinkByName(in.Name)
		if err == nil {
			err = f.nl.LinkSetUp(dev)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", in.Name, err)
		}
		f.links[in.Name] = dev.Attrs().Index
		if cpus := c.Engines[f.index].CPUs; len(cpus) > 0 {
			if err := netnsutil.SetRPS(f.ns, in.Name, CPUMask(cpus)); err != nil {
				return err
			}
		}
	}
	return nil
}

// addIface makes the FE's copy of one interface and its substrate end; in a holder, the copy
// is a VXLAN device towards the node's machine, and has no substrate end here.
func (f *fe) addIface(c Config, in Iface) error {
	if c.Home != "" {
		vx := vxlanTo(in.Name, plan.EngineVNI(c.Network, c.Node, f.index, in.Name), c.Local, c.Home, in.MTU)
		vx.Namespace = netlink.NsFd(f.ns) // its socket stays here, in the substrate
		if mac, err := net.ParseMAC(in.MAC); err == nil {
			vx.HardwareAddr = mac
		}
		if err := netlink.LinkAdd(vx); err != nil {
			return fmt.Errorf("%s: %w", in.Name, err)
		}
		return nil
	}
	name := in.FEPorts[f.index]
	if err := netdev.Delete(name); err != nil { // left by a helper that was killed
		return err
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name, MTU: in.MTU},
		PeerName:      in.Name,
		PeerNamespace: netlink.NsFd(f.ns),
	}
	if mac, err := net.ParseMAC(in.MAC); err == nil {
		veth.PeerHardwareAddr = mac
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("%s for %s: %w", name, in.Name, err)
	}
	dev, err := netdev.UpQuiet(name)
	if err != nil {
		return err
	}
	f.ports[in.Name] = dev.Attrs().Index
	return nil
}

// CPUMask is the rps_cpus mask of a list of CPUs: hexadecimal, in 32-bit words separated by
// commas, as the kernel writes it.
func CPUMask(cpus []int) string {
	m := new(big.Int)
	top := 0
	for _, c := range cpus {
		m.SetBit(m, c, 1)
		top = max(top, c)
	}
	var words []string
	for w := top / 32; w >= 0; w-- {
		v := new(big.Int).Rsh(m, uint(32*w))
		words = append(words, fmt.Sprintf("%08x", v.Uint64()&0xffffffff))
	}
	return strings.Join(words, ",")
}
