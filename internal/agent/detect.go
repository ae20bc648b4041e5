package agent

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/vishvananda/netlink"
)

// ErrNoUnderlay: no IPv4 address to run tunnels from was found; --address must say it.
var ErrNoUnderlay = errors.New("no underlay address found")

// Detect fills in what m leaves zero from the machine itself: cores, memory (MemTotal), the
// underlay address (the source of the default route, else the first global IPv4 address of an
// interface that is up), its interface's MTU, and the NIC rate (the interface's speed, where
// the driver reports one). A given address is looked up for its interface's MTU and rate.
func Detect(m *cluster.Machine) error {
	if m.Cores == 0 {
		m.Cores = float64(runtime.NumCPU())
	}
	if m.Memory == 0 {
		mem, err := memTotal()
		if err != nil {
			return err
		}
		m.Memory = mem
	}
	link, addr, err := underlay(m.Address)
	if err != nil {
		return err
	}
	if !m.Address.IsValid() {
		m.Address = addr
	}
	if link == nil {
		return nil
	}
	if m.MTU == 0 {
		m.MTU = link.Attrs().MTU
	}
	if m.Rate == 0 {
		if data, err := os.ReadFile("/sys/class/net/" + link.Attrs().Name + "/speed"); err == nil {
			if mbit, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && mbit > 0 {
				m.Rate = uint64(mbit) * 1_000_000
			}
		}
	}
	return nil
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal() (uint64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: MemTotal: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/meminfo: no MemTotal")
}

// underlay finds the interface and address of the machine's underlay: want's interface, or the
// default route's source, or the first global IPv4 address of an interface that is up.
func underlay(want netip.Addr) (netlink.Link, netip.Addr, error) {
	if !want.IsValid() {
		if routes, err := netlink.RouteGet(net.IPv4(198, 51, 100, 1)); err == nil && len(routes) > 0 && routes[0].Src != nil {
			want, _ = netip.AddrFromSlice(routes[0].Src.To4())
		}
	}
	// Every address in one dump: a machine may have thousands of interfaces (nodes' ports).
	addrs, err := netdev.Dump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, want, err
	}
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP.To4())
		if !(want.IsValid() && ip == want) && !(!want.IsValid() && ip.IsGlobalUnicast()) {
			continue
		}
		l, err := netlink.LinkByIndex(a.LinkIndex)
		if err != nil || l.Attrs().Flags&net.FlagUp == 0 || l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		return l, ip, nil
	}
	if want.IsValid() {
		return nil, want, nil // an address of another machine's view (NAT): no MTU or rate known
	}
	return nil, want, fmt.Errorf("%w: give --address, the IPv4 address other machines reach this one's tunnels at", ErrNoUnderlay)
}
