//go:build integration

package rtnl

import (
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestReadsAnotherNamespace builds, in a namespace standing in for the machine, a "node"
// namespace joined to it by a veth pair with addresses and a tbf qdisc, and checks that what
// a Conn of the machine reads of the node by namespace id is what netlink reads from inside.
func TestReadsAnotherNamespace(t *testing.T) {
	machine, err := netnsutil.New()
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	node, err := netnsutil.New()
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	// A process of the node, for the namespace id by pid; it ends with the test.
	var sleeper *exec.Cmd
	if err := netnsutil.Do(node, func() error {
		sleeper = exec.Command("sleep", "60")
		return sleeper.Start()
	}); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	err = netnsutil.Do(machine, func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "port0", MTU: 1400}, PeerName: "eth1", PeerNamespace: netlink.NsFd(node)}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		port, err := netlink.LinkByName("port0")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(port); err != nil {
			return err
		}
		return netlink.QdiscAdd(&netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: port.Attrs().Index, Handle: netlink.MakeHandle(1, 0),
			Parent: netlink.HANDLE_ROOT}, Rate: 1 << 20, Limit: 1 << 16, Buffer: 1 << 14})
	})
	if err != nil {
		t.Fatal(err)
	}
	inside := setUpNode(t, node)
	netnsutil.Do(machine, func() error {
		conn, err := Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		checkMachine(t, conn, sleeper.Process.Pid, inside)
		checkCache(t, conn, node, sleeper.Process.Pid)
		return nil
	})
}

// checkCache checks that a Cache gives what it read again while its Watch hears no change in
// the node's namespace, and reads again once an address was added there.
func checkCache(t *testing.T, conn *Conn, node netns.NsHandle, pid int) {
	t.Helper()
	nsid, err := conn.NsID(pid)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWatch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := NewCache(w)
	w.Sync()
	links, addrs, err := c.Read(nsid)
	if err != nil {
		t.Fatal(err)
	}
	again, _, _ := c.Read(nsid)
	if len(links) == 0 || &again[0] != &links[0] {
		t.Errorf("a second read without a change was not the kept one")
	}
	v := w.Version(nsid)
	err = netnsutil.Do(node, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr("10.9.9.9/32")
		return netlink.AddrAdd(lo, a)
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Sync()
	if w.Version(nsid) == v {
		t.Fatalf("the watch heard no change after an address was added in namespace %d", nsid)
	}
	_, now, err := c.Read(nsid)
	has := func(as []Addr) bool {
		return slices.ContainsFunc(as, func(a Addr) bool { return a.Prefix.String() == "10.9.9.9/32" })
	}
	if err != nil || has(addrs) || !has(now) {
		t.Errorf("addresses before the change %v, after %v (%v): want 10.9.9.9/32 after only", addrs, now, err)
	}
}

// setUpNode gives the node's eth1 addresses and sets it up, and returns its devices and
// addresses as netlink reads them from inside, by device name.
func setUpNode(t *testing.T, node netns.NsHandle) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := netnsutil.Do(node, func() error {
		eth1, err := netlink.LinkByName("eth1")
		if err != nil {
			return err
		}
		for _, a := range []string{"10.9.0.1/30", "fd00:9::1/64"} {
			addr, _ := netlink.ParseAddr(a)
			addr.Flags = 0x80 // IFA_F_NODAD: no waiting for duplicate detection
			if err := netlink.AddrAdd(eth1, addr); err != nil {
				return err
			}
		}
		if err := netlink.LinkSetUp(eth1); err != nil {
			return err
		}
		// The IPv6 link-local address comes a moment after eth1 is up: wait for it.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if addrs, err := netlink.AddrList(eth1, netlink.FAMILY_ALL); err == nil && len(addrs) == 3 {
				break
			}
		}
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
			if err != nil {
				return err
			}
			a := l.Attrs()
			key := fmt.Sprintf("%s %s %d %s", a.Name, a.HardwareAddr, a.MTU, a.OperState)
			out[key] = []string{}
			for _, a := range addrs {
				out[key] = append(out[key], a.IPNet.String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkMachine checks, through conn in the machine's namespace, the port, its qdisc and the
// node's devices and addresses (inside: what netlink read from inside, "name mac mtu state" -> addresses).
func checkMachine(t *testing.T, conn *Conn, pid int, inside map[string][]string) {
	t.Helper()
	links, err := conn.Links(Own)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(links, func(l Link) bool { return l.Name == "port0" })
	if i < 0 {
		t.Fatalf("no port0 in %+v", links)
	}
	port := links[i]
	nsid, err := conn.NsID(pid)
	if err != nil || nsid < 0 || nsid != port.PeerNetNsID {
		t.Fatalf("namespace id of the node's process %d (%v), port's peer's %d", nsid, err, port.PeerNetNsID)
	}
	if port.MTU != 1400 || port.Flags&1 == 0 {
		t.Errorf("port0: %+v, want MTU 1400 and up", port)
	}
	drops, err := conn.QdiscDrops("tbf")
	if _, ok := drops[port.Index]; err != nil || !ok {
		t.Errorf("tbf drops %v (%v), none for port0 (%d)", drops, err, port.Index)
	}
	got := readNode(t, conn, nsid)
	for key, want := range inside {
		if g, ok := got[key]; !ok || !slices.Equal(g, want) {
			t.Errorf("%s: addresses %v (found: %v) read by id, %v from inside", key, g, ok, want)
		}
	}
	if len(inside) != 2 || len(got) != 2 {
		t.Errorf("the node's devices from inside %v, by id %v: want lo and eth1", inside, got)
	}
	checkDialPid(t, pid, inside)
}

// checkDialPid checks that a Conn opened by DialPid in the node's namespace reads what netlink
// read from inside, and that the caller's thread is back in the machine's namespace after it.
func checkDialPid(t *testing.T, pid int, inside map[string][]string) {
	t.Helper()
	own, err := DialPid(pid)
	if err != nil {
		t.Fatal(err)
	}
	got := readNode(t, own, Own)
	own.Close()
	if !maps.EqualFunc(got, inside, slices.Equal) {
		t.Errorf("the node's devices read by DialPid %v, from inside %v", got, inside)
	}
	again, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	links, err := again.Links(Own)
	if err != nil || !slices.ContainsFunc(links, func(l Link) bool { return l.Name == "port0" }) {
		t.Errorf("after DialPid, the thread's namespace has no port0 (%v): not back in the machine's", err)
	}
	if _, err := DialPid(1 << 30); err == nil {
		t.Errorf("DialPid of a process that does not exist: no error")
	}
}

// readNode reads the node's devices and addresses by namespace id: "name mac mtu state" -> addresses.
func readNode(t *testing.T, conn *Conn, nsid int) map[string][]string {
	links, err := conn.Links(nsid)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := conn.Addrs(nsid)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, l := range links {
		key := fmt.Sprintf("%s %s %d %s", l.Name, l.MAC, l.MTU, netlink.LinkOperState(l.OperState))
		out[key] = []string{}
		for _, a := range addrs {
			if a.Index == l.Index {
				out[key] = append(out[key], a.Prefix.String())
			}
		}
	}
	return out
}
