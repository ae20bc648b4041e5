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
