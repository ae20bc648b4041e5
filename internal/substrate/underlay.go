package substrate

import (
	"fmt"

	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/spec"
)

// LocalHost tells which of a network's hosts this machine is: the one whose underlay address
// is configured here. It fails if none or several are.
func LocalHost(n *spec.Network) (string, error) {
	var found []string
	for _, h := range n.Hosts {
		if _, err := netdev.Underlay(h.Address); err == nil {
			found = append(found, h.Name)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%s: no host's address is configured on this machine; say which host it is with --host", n.File)
	default:
		return "", fmt.Errorf("%s: hosts %v all have addresses on this machine; say which one it is with --host", n.File, found)
	}
}
