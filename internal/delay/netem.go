package delay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Settings are what a delay does to the frames one interface sends.
type Settings struct {
	Delay, Jitter time.Duration
	Distribution  string // of the jitter (spec.Distributions); "" is uniform
}

// Limit is how many frames a delay holds at once (netem's default, which Mininet keeps): a
// frame arriving when it is full is dropped.
const Limit = 1000

// netem's attributes (include/uapi/linux/pkt_sched.h) that the nl package does not name.
const (
	tcaNetemLatency64 = 10
	tcaNetemJitter64  = 11
)

// psched ticks are 64 ns (PSCHED_SHIFT 6): netem's fixed header keeps the delay in them, and
// its 64-bit attributes, which take precedence, in nanoseconds.
const nsPerTick = 64

// netemOptions returns netem's TCA_OPTIONS for s: the fixed tc_netem_qopt followed by the
// 64-bit delay and jitter and, with jitter, the distribution's table, which is always sent
// (uniform too) because a change without a table keeps the previous one.
func netemOptions(s Settings) *nl.RtAttr {
	qopt := nl.TcNetemQopt{
		Latency: ticks(s.Delay),
		Jitter:  ticks(s.Jitter),
		Limit:   Limit,
	}
	opts := nl.NewRtAttr(nl.TCA_OPTIONS, qopt.Serialize())
	opts.AddRtAttr(tcaNetemLatency64, nl.Uint64Attr(uint64(s.Delay.Nanoseconds())))
	opts.AddRtAttr(tcaNetemJitter64, nl.Uint64Attr(uint64(s.Jitter.Nanoseconds())))
	if s.Jitter > 0 {
		var b bytes.Buffer
		binary.Write(&b, binary.NativeEndian, Table(s.Distribution)) // to a buffer: never fails
		opts.AddRtAttr(nl.TCA_NETEM_DELAY_DIST, b.Bytes())
	}
	return opts
}

func ticks(d time.Duration) uint32 {
	return uint32(min(uint64(d.Nanoseconds())/nsPerTick, math.MaxUint32))
}

// netemRequest is the RTM_NEWQDISC request that puts netem with settings s at the root of
// device ifindex, or changes the one there in place (its held frames stay).
func netemRequest(ifindex int, s Settings) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE|unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{
		Family:  nl.FAMILY_ALL,
		Ifindex: int32(ifindex),
		Handle:  netlink.MakeHandle(1, 0),
		Parent:  netlink.HANDLE_ROOT,
	})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("netem")))
	req.AddData(netemOptions(s))
	return req
}

// SetNetem puts netem with settings s on the egress of device ifindex (the hold end of a
// port's delay pair), or changes it live, in the calling thread's namespace.
func SetNetem(ifindex int, s Settings) error {
	if _, err := netemRequest(ifindex, s).Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("netem on device %d: %w", ifindex, err)
	}
	return nil
}

// ErrNoNetem: the kernel has no netem (sch_netem is neither built in nor loadable).
var ErrNoNetem = errors.New("the kernel has no netem queueing discipline (sch_netem)")
