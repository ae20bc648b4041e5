package dataplane

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// Target returns the ifindex that packets of tunnel (key, remote) go to, and false if the
// machine has no such tunnel.
func (d *Decap) Target(key uint32, remote netip.Addr) (int, bool, error) {
	if !remote.Is4() {
		return 0, false, fmt.Errorf("dataplane: EGRE decap target: remote address %v is not IPv4", remote)
	}
	k := tunnelMapKey(key, remote)
	var v egreTunnelValue
	d.mu.Lock()
	defer d.mu.Unlock()
	switch err := d.tunnels.Lookup(&k, &v); {
	case errors.Is(err, ebpf.ErrKeyNotExist):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("dataplane: EGRE decap target: %w", err)
	}
	return int(v.Ifindex), true, nil
}
