package metrics

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// device is what a scrape needs of a root namespace device.
type device struct {
	Index int
	Up    bool // administratively up: a port that gives its interface carrier
	// Counters, for tunnel devices.
	RxFrames, TxFrames, RxBytes, TxBytes uint64
}

// listDevices dumps the calling thread's namespace's devices, reading only their name, index,
// flags and counters: with thousands of ports this is several times faster than
// netlink.LinkList, which decodes every attribute of every device.
func listDevices() (map[string]device, error) {
	var msgs [][]byte
	var err error
	for try := 0; try < 50; try++ {
		req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_DUMP)
		req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
		msgs, err = req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]device, len(msgs))
	for _, m := range msgs {
		ifi := nl.DeserializeIfInfomsg(m)
		attrs, err := nl.ParseRouteAttr(m[ifi.Len():])
		if err != nil {
			return nil, err
		}
		d := device{Index: int(ifi.Index), Up: ifi.Flags&unix.IFF_UP != 0}
		name := ""
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.IFLA_IFNAME:
				name = string(bytes.TrimRight(a.Value, "\x00"))
			case unix.IFLA_STATS64:
				if len(a.Value) >= 32 { // rx_packets, tx_packets, rx_bytes, tx_bytes first
					d.RxFrames = binary.NativeEndian.Uint64(a.Value[0:])
					d.TxFrames = binary.NativeEndian.Uint64(a.Value[8:])
					d.RxBytes = binary.NativeEndian.Uint64(a.Value[16:])
					d.TxBytes = binary.NativeEndian.Uint64(a.Value[24:])
				}
			}
		}
		if name != "" {
			out[name] = d
		}
	}
	return out, nil
}
