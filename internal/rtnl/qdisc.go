package rtnl

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

const (
	sizeofTcMsg   = 20 // struct tcmsg: family, padding, ifindex, handle, parent, info
	tcaStatsQueue = 3  // TCA_STATS_QUEUE, in TCA_STATS2
)

// QdiscDrops returns the frames each qdisc of kind dropped (its queue statistics), by the
// index of its device, for the Conn's namespace: one dump for every device.
func (c *Conn) QdiscDrops(kind string) (map[int]uint64, error) {
	out := map[int]uint64{}
	hdr := make([]byte, sizeofTcMsg)
	hdr[0] = unix.AF_UNSPEC
	err := c.dump(unix.RTM_GETQDISC, hdr, nil, func(msg []byte) error {
		if idx, drops, ok := parseQdisc(msg, kind); ok {
			out[idx] += drops
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing qdiscs: %w", err)
	}
	return out, nil
}

// parseQdisc decodes an RTM_NEWQDISC message: its device's index and its drops, if it is of
// kind.
func parseQdisc(msg []byte, kind string) (index int, drops uint64, ok bool) {
	if len(msg) < sizeofTcMsg {
		return 0, 0, false
	}
	index = int(int32(binary.NativeEndian.Uint32(msg[4:])))
	var isKind, hasDrops bool
	attrs(msg[sizeofTcMsg:], func(a attr) {
		switch a.typ {
		case unix.TCA_KIND:
			isKind = string(bytes.TrimRight(a.val, "\x00")) == kind
		case unix.TCA_STATS2:
			attrs(a.val, func(s attr) {
				// struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits (u32 each)
				if s.typ == tcaStatsQueue && len(s.val) >= 12 {
					drops, hasDrops = uint64(binary.NativeEndian.Uint32(s.val[8:])), true
				}
			})
		}
	})
	return index, drops, isKind && hasDrops
}
