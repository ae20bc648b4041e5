package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// impairNet is the impair part's network: two nodes and one link, whose impairment (a line
// of link keys, or none) each measurement sets. The link names its connector so that every
// measurement, the baseline too, crosses the same ports (a link with nothing to enforce is
// otherwise a direct veth pair, re-plugged when an impairment comes).
const impairNet = `name: bench-impair
nodes:
  a:
    addresses: {eth1: [10.9.0.1/24]}
    sysctl: {net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
  b:
    addresses: {eth1: [10.9.0.2/24]}
    sysctl: {net.ipv6.conf.all.disable_ipv6: 1, net.ipv6.conf.default.disable_ipv6: 1}
links:
  - endpoints: [a:eth1, b:eth1]
    connector: shortbridge
`

// Impairments measures these impairments, as a topology file writes them ("" for none, the
// baseline: what the path loses by itself).
var Impairments = []string{"", "loss: 1%", "loss: 10%", "loss: 30%", "loss: 10% 50%", "duplicate: 5%", "corrupt: 1%"}

// impairDelay is the delay the part asks for, to learn whether it can be measured.
const impairDelay = "delay: 20ms"

// impairTopology is the impair part's network with impairment line im on its link.
func impairTopology(im string) []byte {
	if im == "" {
		return []byte(impairNet)
	}
	return []byte(impairNet + "    " + im + "\n")
}

// wantBurst is the mean length of runs of lost frames for loss p (percent) with correlation c
// (percent): a lost frame is followed by another with probability c + (1-c)p.
func wantBurst(im spec.Impairment) float64 {
	p, c := im.Loss/100, im.LossCorrelation/100
	if p == 0 || p == 1 {
		return 0
	}
	return 1 / ((1 - c) * (1 - p))
}

// impair measures what the impairments configured on a running link do to the frames sent
// over it: for each of Impairments, `up` changes the link live and ImpairFrames numbered
// frames cross it from node a to node b (measure.Probe), each measurement repeated. Delay is
// asked for too, for the note that says where it is measured (the delay part).
func (r *runner) impair() (err error) {
	st, err := r.h.Store()
	if err != nil {
		return err
	}
	res := &result.ImpairResult{Frames: r.opt.ImpairFrames, Load1: load1()}
	const name = "bench-impair"
	defer func() { err = errors.Join(err, setup.DownQuiet(st, name)) }()
	var pr *impairProbe
	defer func() { pr.close() }()
	for _, text := range Impairments {
		n, err := spec.Parse(name+".yaml", impairTopology(text))
		if err != nil {
			return err
		}
		up, err := substrate.Up(context.Background(), st, n, "", name+".yaml", r.opt.Substrate)
		if err != nil {
			return fmt.Errorf("up with %q: %w", text, err)
		}
		for _, c := range up.Changes {
			if c.Object != "link" {
				return fmt.Errorf("up with %q changed more than the link: %v", text, up.Changes)
			}
		}
		if pr == nil {
			if pr, err = openImpairProbe(st, name); err != nil {
				return err
			}
		}
		row, err := r.impairRow(pr, text, n.Links[0].Impair)
		if err != nil {
			return fmt.Errorf("%q: %w", text, err)
		}
		res.Rows = append(res.Rows, row)
	}
	res.Delay = r.delayNote(st, name)
	r.rep.Impair = res
	return nil
}

// impairRow measures one impairment, configured as text (im parsed), Repeat times.
func (r *runner) impairRow(pr *impairProbe, text string, im spec.Impairment) (*result.ImpairRow, error) {
	var loss, dup, corrupt, burst []float64
	for rep := 0; rep < r.opt.Repeat; rep++ {
		t, err := pr.run(r.ctx, r.opt.ImpairFrames)
		if err != nil {
			return nil, err
		}
		l, b := t.Loss()
		loss, dup, corrupt, burst = append(loss, l), append(dup, t.Duplicates()), append(corrupt, t.CorruptPercent()), append(burst, b)
	}
	row := &result.ImpairRow{Config: text, Loss: im.Loss, LossCorrelation: im.LossCorrelation, Duplicate: im.Duplicate, Corrupt: im.Corrupt,
		GotLoss: result.StatOf(loss), GotDuplicate: result.StatOf(dup), GotCorrupt: result.StatOf(corrupt)}
	if im.Loss > 0 {
		row.WantBurst = wantBurst(im)
		s := result.StatOf(burst)
		row.GotBurst = &s
	}
	if text == "" {
		row.Config = "none"
	}
	r.logf("   %-14s lost %.2f%% (bursts %.2f), duplicated %.2f%%, corrupted %.2f%%\n", row.Config, row.GotLoss.Median, statMedian(row.GotBurst), row.GotDuplicate.Median, row.GotCorrupt.Median)
	return row, nil
}

func statMedian(s *result.Stat) float64 {
	if s == nil {
		return 0
	}
	return s.Median
}

// delayNote asks up for a delay on the running link and says where delay is measured (the
// delay part), or why up refused it (a kernel with no way to delay frames). A refused change
// leaves the network as it was.
func (r *runner) delayNote(st *state.Store, name string) string {
	n, err := spec.Parse(name+".yaml", impairTopology(impairDelay))
	if err == nil {
		_, err = substrate.Up(context.Background(), st, n, "", name+".yaml", r.opt.Substrate)
	}
	note := fmt.Sprintf("`up` with `%s` on the link was accepted: see the delay part for what it delivered", impairDelay)
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		note = fmt.Sprintf("not measured: `up` with `%s` on the link refused it: %s (so does the delay part)", impairDelay, msg)
	}
	r.logf("   delay: %s\n", note)
	return note
}

// impairProbe sends numbered frames from node a's eth1 and counts them on node b's.
type impairProbe struct {
	tx   *measure.TxPort
	rxNS netns.NsHandle
	txNS netns.NsHandle
	base []byte
}

// openImpairProbe opens the probe's sockets in the nodes of network name.
func openImpairProbe(st *state.Store, name string) (p *impairProbe, err error) {
	rec, err := st.Load(name)
	if err != nil || rec == nil {
		return nil, fmt.Errorf("network %s: no record after up (%v)", name, err)
	}
	p = &impairProbe{rxNS: -1, txNS: -1}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.txNS, err = netns.GetFromPid(rec.Nodes["a"]); err != nil {
		return nil, fmt.Errorf("node a: %w", err)
	}
	if p.rxNS, err = netns.GetFromPid(rec.Nodes["b"]); err != nil {
		return nil, fmt.Errorf("node b: %w", err)
	}
	srcMAC, err := macOf(p.txNS, "eth1")
	if err != nil {
		return nil, err
	}
	dstMAC, err := macOf(p.rxNS, "eth1")
	if err != nil {
		return nil, err
	}
	frames, err := measure.UDPFrames(measure.FlowAddrs{SrcMAC: srcMAC, DstMAC: dstMAC, SrcIP: net.IPv4(10, 9, 0, 1), DstIP: net.IPv4(10, 9, 0, 2),
		SrcPort: 10000, DstPort: 9}, 64, 1)
	if err != nil {
		return nil, err
	}
	p.base = frames[0]
	if p.tx, err = measure.OpenTxPort(p.txNS, "eth1"); err != nil {
		return nil, err
	}
	return p, nil
}

// run sends n numbered frames, marked as a run of their own, and counts what arrived.
func (p *impairProbe) run(ctx context.Context, n int) (*measure.Tally, error) {
	frames, err := measure.SeqFrames(p.base, rand.Uint32(), n)
	if err != nil {
		return nil, err
	}
	return measure.Probe(ctx, p.tx, p.rxNS, "eth1", frames)
}

func (p *impairProbe) close() {
	if p == nil {
		return
	}
	if p.tx != nil {
		p.tx.Close()
	}
	for _, ns := range []netns.NsHandle{p.txNS, p.rxNS} {
		if ns >= 0 {
			ns.Close()
		}
	}
}

// macOf is the hardware address of interface ifname in namespace ns.
func macOf(ns netns.NsHandle, ifname string) (net.HardwareAddr, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ifname, err)
	}
	return l.Attrs().HardwareAddr, nil
}
