package substrate

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// setShapers caps the egress of each port (the direction towards its node) at rate bits per
// second, or removes the cap when rate is 0. The shaper is a token bucket (TBF) in the
// substrate, out of reach of a node's root user (docs/design.md, decision 4).
func setShapers(m machine, ports []netlink.Link, rate uint64) error {
	for _, p := range ports {
		if err := m.SetShaper(p, rate); err != nil {
			return fmt.Errorf("shaper on %s: %w", p.Attrs().Name, err)
		}
	}
	return nil
}

func setShaper(port netlink.Link, rate uint64) error {
	attrs := netlink.QdiscAttrs{LinkIndex: port.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT}
	if rate == 0 {
		err := netlink.QdiscDel(&netlink.Tbf{QdiscAttrs: attrs})
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			return nil // there was no shaper
		}
		return err
	}
	bytesPerSec := rate / 8
	mtu := uint64(port.Attrs().MTU) + 14
	// The bucket holds 20 ms of traffic (at least two frames). A sender in a node on this
	// machine keeps only about a millisecond of data queued below its socket (TCP small
	// queues: a frame stays charged to the socket until it has passed the shaper and been
	// received), so the shaper's queue runs empty whenever the sender is not scheduled for a
	// few milliseconds, and tokens that overflow a full bucket are lost for good. With a 4 ms
	// bucket, kernel work elsewhere on the machine (namespaces being freed) held TCP at 94-95 %
	// of a 100mbit cap with no drop and no retransmission; 20 ms absorbs such stalls, and lets
	// through at most 20 ms of traffic above the rate after an idle period.
	// The queue holds 100 ms more (at least 2 buckets): a shorter one makes TCP lose packets,
	// and throughput, on slow links.
	burst := max(bytesPerSec/50, 2*mtu)
	limit := max(bytesPerSec/10, 2*burst)
	// The kernel takes the bucket size as the time to send it at the rate, in ticks.
	buffer := netlink.Xmittime(bytesPerSec, uint32(burst))
	return netlink.QdiscReplace(&netlink.Tbf{QdiscAttrs: attrs, Rate: bytesPerSec, Buffer: buffer, Limit: uint32(limit)})
}
