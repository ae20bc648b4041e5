package dataplane

// Link impairments in eBPF (bpf/impair.c): loss (optionally correlated),
// duplication and corruption of the frames a node sends on an interface,
// applied on the tc ingress of the interface's port before the frame is
// forwarded (see forward.go for the order of the filters). They need no
// netem, so they work on every kernel with BPF (6.2 or later, for the
// bpf_cast_to_kern_ctx kfunc that corruption uses to see how far a frame's
// checksum is done).
//
// Like the shortbridge, the impairment program goes on the port's tcx ingress
// (at the head of its list, before the shortbridge) where the kernel has tcx,
// and is a classic tc filter otherwise (hook.go); never pinned: it and its
// maps live as long as the port, and are found again through the program
// (its info lists its maps), so a restarted trellis reads and changes
// impairments it did not attach itself.

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Identity of the impairment filter on a port's tc ingress.
const (
	impairFilterName   = "trellis_impair"
	impairFilterHandle = 0x1a
)

// ErrNoImpairment: the port has no impairment program.
var ErrNoImpairment = fmt.Errorf("no impairment program attached: %w", fs.ErrNotExist)

// Impairment is what happens to the frames one interface sends, in percent
// of frames (0 to 100). A frame here is what the port sees, so a TCP
// segmentation offload super-frame counts as one frame, as it does for
// netem.
type Impairment struct {
	// Loss is the share of frames dropped.
	Loss float64
	// LossCorrelation (below 100) makes losses come in bursts: a frame
	// repeats the previous frame's outcome with this probability, and is
	// lost with probability Loss otherwise. The loss rate stays Loss, and
	// a burst lasts 1/((1-C)(1-Loss)) frames on average instead of
	// 1/(1-Loss). This is what netem's "loss P% C%" means to do; netem's
	// own generator delivers less loss than P when C is not 0.
	LossCorrelation float64
	// Duplicate is the share of frames sent twice. The copy follows the
	// original through the forwarding program and any shaper, and may
	// itself be lost or corrupted, but is never duplicated again.
	Duplicate float64
	// Corrupt is the share of frames with one random bit flipped, placed so
	// that the receiver's checks see it (see bpf/impair.c): in the frame's
	// linear part, or in its Ethernet and IP headers when its transport
	// checksum is left to offload (TCP and UDP sent by a local socket).
	Corrupt float64
}

// IsZero reports whether im impairs nothing (LossCorrelation alone does
// nothing).
func (im Impairment) IsZero() bool {
	return im.Loss == 0 && im.Duplicate == 0 && im.Corrupt == 0
}

func (im Impairment) validate() error {
	for _, f := range []struct {
		name string
		v    float64
		max  float64
	}{
		{"loss", im.Loss, 100},
		{"loss correlation", im.LossCorrelation, 100},
		{"duplicate", im.Duplicate, 100},
		{"corrupt", im.Corrupt, 100},
	} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > f.max {
			return fmt.Errorf("%s %v%% is not between 0 and 100", f.name, f.v)
		}
	}
	if im.LossCorrelation == 100 {
		return errors.New("loss correlation 100% would repeat the first outcome forever: use less than 100")
	}
	return nil
}

// threshold turns a percentage into the program's form: an event happens
// when a uniform random uint32 is below it.
func threshold(percent float64) uint64 {
	return uint64(math.Round(percent / 100 * (1 << 32)))
}

// percent is the inverse of threshold, to a millionth of a percent.
func percent(threshold uint64) float64 {
	return math.Round(float64(threshold)/(1<<32)*100*1e6) / 1e6
}

func (im Impairment) config() impairImpairConfig {
	return impairImpairConfig{
		Loss:      threshold(im.Loss),
		LossCorr:  threshold(im.LossCorrelation),
		Duplicate: threshold(im.Duplicate),
		Corrupt:   threshold(im.Corrupt),
	}
}

func impairmentOf(c impairImpairConfig) Impairment {
	return Impairment{
		Loss:            percent(c.Loss),
		LossCorrelation: percent(c.LossCorr),
		Duplicate:       percent(c.Duplicate),
		Corrupt:         percent(c.Corrupt),
	}
}

var (
	impairOnce    sync.Once
	impairSpec    *ebpf.CollectionSpec
	impairSpecErr error
	// impairSpecMu guards the copying of impairSpec (see shortbridgeSpecMu).
	impairSpecMu sync.Mutex

	// impairMu serialises finding, attaching, updating and removing
	// impairment filters in this process, so that two concurrent calls for
	// one port cannot both attach a program, the first call's settings
	// then being lost with its program.
	impairMu sync.Mutex
)

// loadImpairSpec parses the embedded ELF once per process.
func loadImpairSpec() (*ebpf.CollectionSpec, error) {
	impairOnce.Do(func() {
		// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK.
		if err := rlimit.RemoveMemlock(); err != nil {
			impairSpecErr = fmt.Errorf("dataplane: lifting memlock rlimit: %w", err)
			return
		}
		impairSpec, impairSpecErr = loadImpair()
	})
	return impairSpec, impairSpecErr
}

// SetImpairment makes the frames sent by the interface whose port has index
// portIfindex suffer im: it attaches an impairment program to the port's
// ingress, on the hook c chooses (tcx, or a tc filter under a clsact
// qdisc, added if there is none) unless the port's shortbridge or delay is
// on tcx (portHook), in front of the port's forwarding program
// if any; or, if one is attached already (on either hook), changes its
// settings live with one map update. A zero Impairment (see IsZero) removes
// the program; a clsact qdisc stays, as it does for the other programs, and
// goes with the port.
//
// It is idempotent, works in the calling thread's network namespace, and is
// safe to call concurrently (the last call wins).
func SetImpairment(c Config, portIfindex int, im Impairment) error {
	hook, err := portHook(c, portIfindex)
	if err != nil {
		return err
	}
	if err := setImpairment(portIfindex, im, hook); err != nil {
		return fmt.Errorf("dataplane: set impairment on port %d (%+v): %w", portIfindex, im, err)
	}
	return nil
}

// setImpairment is SetImpairment attaching on hook if the port has no impairment yet.
func setImpairment(portIfindex int, im Impairment, hook Hook) error {
	if portIfindex <= 0 || portIfindex > int(^uint32(0)>>1) {
		return fmt.Errorf("invalid port ifindex %d", portIfindex)
	}
	if err := im.validate(); err != nil {
		return err
	}
	if im.Corrupt > 0 {
		if err := CheckCorrupt(); err != nil {
			return err
		}
	}
	h := &netlink.Handle{} // the calling thread's namespace, at each call

	impairMu.Lock()
	defer impairMu.Unlock()

	at, err := findImpairment(h, portIfindex)
	if err != nil {
		return err
	}
	defer at.close()
	switch {
	case im.IsZero() && at.id == 0:
		return nil
	case im.IsZero():
		return at.remove(h, portIfindex)
	case at.id != 0:
		return updateImpairment(at.id, im)
	}
	return attachImpairment(h, hook, portIfindex, im)
}

// updateImpairment writes new settings into the config map of the attached
// program id.
func updateImpairment(id ebpf.ProgramID, im Impairment) error {
	maps, err := programMaps(id, impairMapImpairConfig)
	if err != nil {
		return err
	}
	m := maps[impairMapImpairConfig]
	defer m.Close()
	cfg := im.config()
	if err := m.Update(uint32(0), &cfg, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("updating impairment settings: %w", err)
	}
	return nil
}

// attachImpairment loads a program with settings im and attaches it on hook: at the head of
// the port's tcx ingress, or at priority 1 of its clsact ingress after moving a forwarding
// filter from there.
func attachImpairment(h *netlink.Handle, hook Hook, portIfindex int, im Impairment) error {
	if hook == HookClsact {
		if err := ensureClsactOn(h, portIfindex); err != nil {
			return err
		}
		if err := moveLegacyForwardFilter(h, portIfindex); err != nil {
			return err
		}
	}

	base, err := loadImpairSpec()
	if err != nil {
		return err
	}
	impairSpecMu.Lock()
	spec := base.Copy()
	impairSpecMu.Unlock()

	var objs impairObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return loadError("impairment", err)
	}
	// The filter or the tcx attachment holds the program, and the program its maps.
	defer objs.Close()

	// Settings first: the program runs with them from its first frame.
	cfg := im.config()
	if err := objs.ImpairConfig.Update(uint32(0), &cfg, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("writing impairment settings: %w", err)
	}
	if hook == HookTCX {
		return attachTCX(portIfindex, objs.Impair, impairProgName, true)
	}
	filter := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: portIfindex,
			Parent:    netlink.HANDLE_MIN_INGRESS,
			Handle:    impairFilterHandle,
			Priority:  impairFilterPriority,
			// Every ethertype: ARP and non-IP frames are impaired too.
			Protocol: unix.ETH_P_ALL,
		},
		Fd:           objs.Impair.FD(),
		Name:         impairFilterName,
		DirectAction: true,
	}
	if err := h.FilterReplace(filter); err != nil {
		return fmt.Errorf("replacing tc ingress filter: %w", err)
	}
	return nil
}

// ReadImpairment returns the settings of the impairment program on the port
// with index portIfindex (a zero Impairment if there is none), to a
// millionth of a percent. It works in the calling thread's namespace.
func ReadImpairment(portIfindex int) (Impairment, error) {
	at, err := findImpairment(&netlink.Handle{}, portIfindex)
	if err != nil || at.id == 0 {
		if err != nil {
			err = fmt.Errorf("dataplane: impairment of port %d: %w", portIfindex, err)
		}
		return Impairment{}, err
	}
	at.close()
	maps, err := programMaps(at.id, impairMapImpairConfig)
	if err != nil {
		return Impairment{}, fmt.Errorf("dataplane: impairment of port %d: %w", portIfindex, err)
	}
	m := maps[impairMapImpairConfig]
	defer m.Close()
	var cfg impairImpairConfig
	if err := m.Lookup(uint32(0), &cfg); err != nil {
		return Impairment{}, fmt.Errorf("dataplane: impairment of port %d: reading settings: %w", portIfindex, err)
	}
	return impairmentOf(cfg), nil
}

// ImpairCounters are the counters of one port's impairment program since it
// was attached (summed over CPUs).
type ImpairCounters struct {
	// Frames counts the frames the program saw, duplicates included.
	Frames uint64
	// Dropped counts frames lost.
	Dropped uint64
	// Duplicated counts duplicates sent.
	Duplicated uint64
	// Corrupted counts frames with a bit flipped.
	Corrupted uint64
}

// ReadImpairCounters reads the counters of the impairment program on the
// port with index portIfindex, in the calling thread's network namespace.
// With no program there, the error matches ErrNoImpairment.
func ReadImpairCounters(portIfindex int) (ImpairCounters, error) {
	var c ImpairCounters
	at, err := findImpairment(&netlink.Handle{}, portIfindex)
	if err == nil && at.id == 0 {
		err = ErrNoImpairment
	}
	if err != nil {
		return c, fmt.Errorf("dataplane: impairment counters of port %d: %w", portIfindex, err)
	}
	at.close()
	maps, err := programMaps(at.id, impairMapImpairStats)
	if err != nil {
		return c, fmt.Errorf("dataplane: impairment counters of port %d: %w", portIfindex, err)
	}
	stats := maps[impairMapImpairStats]
	defer stats.Close()
	for slot, dst := range []*uint64{&c.Frames, &c.Dropped, &c.Duplicated, &c.Corrupted} {
		if *dst, err = sumPerCPU(stats, uint32(slot)); err != nil {
			return c, fmt.Errorf("dataplane: impairment counters of port %d: %w", portIfindex, err)
		}
	}
	return c, nil
}
