//go:build integration

package netdev

import (
	"testing"

	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/vishvananda/netlink"
)

// A request from a thread in another namespace goes to that namespace, and its socket is not
// kept for the process's own.
func TestRequestsFromAnotherNamespace(t *testing.T) {
	ns, err := netnsutil.New()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	for len(idle) > 0 {
		(<-idle).Close()
	}
	err = netnsutil.Do(ns, func() error {
		if err := Add(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "tnd0"}, PeerName: "tnd1"}); err != nil {
			return err
		}
		_, err := get("tnd0")
		return err
	})
	if err != nil {
		t.Fatalf("a device made and found from inside another namespace: %v", err)
	}
	if len(idle) != 0 {
		t.Errorf("%d sockets of another namespace kept for the process's", len(idle))
	}
	if _, err := get("tnd0"); err == nil {
		t.Errorf("the other namespace's device found in the process's namespace")
	}
}

// A kept namespace's sockets are reused for its requests, bounded, and closed when the last
// keeper is done (a kept socket would hold the namespace alive); then its requests open
// sockets for themselves again.
func TestKeepAnotherNamespace(t *testing.T) {
	ns, err := netnsutil.New()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	kept := func() int {
		poolsMu.Lock()
		defer poolsMu.Unlock()
		n := 0
		for _, p := range pools {
			n += len(p.idle)
		}
		return n
	}
	lookup := func() error { _, err := get("lo"); return err }
	done, err := Keep(ns)
	if err != nil {
		t.Fatal(err)
	}
	done2, err := Keep(ns) // a second keeper of the same namespace
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := netnsutil.Do(ns, lookup); err != nil {
			t.Fatal(err)
		}
	}
	if n := kept(); n != 1 {
		t.Errorf("%d sockets kept after three requests one after another, want 1 (reused)", n)
	}
	done()
	done() // once only
	if n := kept(); n != 1 {
		t.Errorf("%d sockets kept while a keeper remains, want 1", n)
	}
	done2()
	if n := kept(); n != 0 {
		t.Errorf("%d sockets kept after the last keeper was done, want 0", n)
	}
	if err := netnsutil.Do(ns, lookup); err != nil {
		t.Fatal(err)
	}
	if n := kept(); n != 0 {
		t.Errorf("%d sockets kept for a namespace no longer kept, want 0", n)
	}
}
