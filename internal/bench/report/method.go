package report

import (
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
)

func methodSection(b *strings.Builder, _ *result.Report, _ string) { b.WriteString(method) }

const method = `## Method

**Setups** (paper, figure 6). Each has a source, one node under test and a sink; the bench builds
them itself and removes them afterwards.

- *direct*: the source's veth ends in the sink; no node under test. It gives the generator's
  ceiling and the sink's own CPU cost.
- *native*: the node under test is a plain network namespace with a veth to the source and one
  to the sink, forwarding in the kernel; no trellis.
- *shortbridge* and *bridge*: source, node under test and sink are the three nodes of one trellis
  network, made by the same code as ` + "`trellis up`" + ` (spec, plan and substrate, in a state directory of
  the bench's own under a temporary directory); the two links use the named connector.
- *userspace*: as shortbridge, but the node under test does not forward in its kernel: a relay
  process in it (` + "`trellis-bench __relay`" + `) receives each UDP datagram on one socket and sends it from
  another, one system call each, as the PL-VINI baseline (a Click socket element) did.
- *egre-shortbridge*, *egre-bridge*, *vxlan*: one trellis network spread over two machines,
  simulated on this one (docs/multi-host.md): each machine is a network namespace of the bench's
  own (named after the bench's pid and a random nonce, removed at the end) with an underlay
  interface eth0 (198.18.x.1 and .2, MTU 1600), the two joined by one veth pair, a cable. The
  source and the sink are nodes on machine A, the node under test on machine B, so both of its
  links cross between the machines in a tunnel: EGRE with the shortbridge or with a bridge as
  connector, or VXLAN (with the shortbridge). Both links have MTU 1500, as in the other setups.
  The bench runs trellis on each machine as a user would, ` + "`ip netns exec MACHINE trellis --state-dir DIR up --host NAME FILE`" + `
  (spec, plan for that host, substrate, inside the machine's namespace), with a state
  directory per machine; the substrate cannot run inside the bench's own process there, because
  it works from many goroutines at once and a network namespace belongs to one thread.
  *egre-shortbridge-fib* is egre-shortbridge with the encapsulation looking the underlay route
  up for every frame (trellis run with TRELLIS_EGRE_ROUTE=per-frame), the path before the
  per-tunnel template of outer headers.
- *egre3-shortbridge*, *egre3-bridge*: the paper's router under test. Three machines, simulated
  as above (198.18.x.1 to .3), each with the source, the node under test or the sink, their
  underlays plugged into a switch (a fourth namespace with a Linux bridge, bridge netfilter
  off). Receive processing of machine B's underlay is steered to the forwarding CPU and that of
  every other receiving device (the source's port, the switch's ports, machine C's underlay) to
  the generator's CPU, in every part: the forwarding CPU's NET_RX time is then machine B's alone
  (decapsulation, connector, forwarding, encapsulation), with no tester's work on it, which is
  what the CPU cost part reports per frame. Their peak may be the generator CPU's limit (it also
  runs machines A and C and the switch), not the router's.

**Generator.** AF_PACKET sockets with PACKET_QDISC_BYPASS, written in Go, fed with sendmmsg(2) in
batches of up to 64 frames, from one thread pinned to the generator CPU. The offered rate is kept
by counting frames due since the start of the trial; frames leave in bursts of at least 32 (like a
NIC with interrupt coalescing: each wake-up of the forwarding CPU serves many frames), and after a
stall the generator catches up with at most 256 frames, so that a hiccup of the machine does not
turn into a burst the node must drop. Frames are UDP over IPv4; their size counts the Ethernet
header and not the FCS (a veth has none); flow i uses source port 10000+i. pktgen is not in our
kernels. trafgen (netsniff-ng) was not used: its rate control sleeps between single packets, far
too coarse at these rates, and it drives one interface per process where the scaling part needs
up to 1024. PACKET_TX_RING was tried and dropped: ring frames cross a veth into another namespace
only after the kernel copies their zero-copy fragments into a fresh page (skb_copy_ubufs), which
held the ring to about 400 kpps where sendmmsg reaches about 650 kpps. The socket's send buffer is
raised (SO_SNDBUFFORCE) so that the generator never waits for the node under test: frames it
cannot take are dropped at the next hop's receive queue (netdev_max_backlog), as a NIC ring would.

**Input and output.** The input rate is what the generator handed to the source interface,
including what its veth's peer refused (the source veth's counters are not used: recent kernels
count a refused frame both in tx_packets and in tx_dropped); the output rate is what the sink
counted. The sink is a ten-instruction eBPF program on the tc ingress hook of the sink's interface
that counts IPv4 frames in a per-CPU map and drops every frame: nothing reaches the sink's IP
stack, a socket or user space. Loss is 1 - output/input.

**Two CPUs, one for each side.** On one machine the generator and the node under test share the
CPUs. The generator runs on CPU 0; receive packet steering (RPS) on the first device that receives
from the source (native: the node's interface; trellis: the source link's port in the root
namespace, or on machine A for the tunnel setups) sends all forwarding work to the last CPU.
Everything after that first hop — the node's IP forwarding, the connectors' eBPF programs or
bridges, the veths, the tunnels' encapsulation and decapsulation on both machines, and the
sink's drop — runs there, so the peak rate is what one CPU forwards along the whole path. For
the tunnel setups this charges machine A's ends of the tunnels (the tester's, in the paper's
setup) to the forwarding CPU too; steering machine A's work to the generator's CPU instead
would make the generator, not the node, the limit on a two-CPU machine. The CPU cost part
steers them apart (below).

**Peak, curve, zero loss.** A sweep offers the generator's full rate, then 2.5 % to 90 % of it, then
rates around the best; the zero-loss rate is an RFC 2544 binary search between the fastest sweep
rate that lost nothing and the slowest that lost frames; a trial passes if it loses at most the
tolerance above (an occasional frame is lost to other work on the machine). The peak is the
highest output of all these trials (past their peak, setups forward less, not the same: frames
dropped at a later hop have cost work first, and when every hop runs on one CPU the first hop's
frames crowd the later hops' out of the same backlog). After each trial the bench waits until
the sink's count stops moving, so that frames still queued do not count in the next trial.

**CPU cost.** Time of the NET_RX softirq, in which the kernel forwards, on the forwarding CPU
during a trial, divided by the frames the sink counted. Two eBPF programs (internal/bench/measure/bpf,
C built with bpf2go) on the tracepoints irq:softirq_entry and irq:softirq_exit add up, per CPU
and vector, the nanoseconds between entry and exit, whether the softirq runs on return from an
interrupt, at the end of a system call or in ksoftirqd; they run once per softirq, which serves
many frames. Other processes on that CPU are not counted (the idle accounting used before
counted them, and on a busy machine gave figures that swung from zero to several times the
truth). For userspace, the relay process's own CPU time (/proc/PID/task/*/schedstat) is added,
less the softirq time that ran on top of it, which a kernel without IRQ_TIME_ACCOUNTING charges
to it too. The sink's share, the same figure in setup direct at the same rate, is subtracted
where the sink works on the forwarding CPU. Each setup is measured at 70 % of its own
zero-loss rate: at a low rate each softirq serves few frames and each frame pays for a wake-up
of the CPU (in a virtual machine, several microseconds). The tunnel setups are steered apart
for this part: RPS sends machine B's underlay (eth0) to the forwarding CPU, and machine A's
underlay and the source's port to the generator's CPU (a third CPU when there is one), so the
forwarding CPU does machine B's work only: its ends of the tunnels, the connectors and the
forwarding, as the node under test's machine does in the paper; machine A's share is under
"other CPUs".

**Where the time goes.** ` + "`perf record -a -g -F 4999`" + ` over all CPUs during one trial at each setup's
zero-loss rate, then ` + "`perf report --no-children --sort sym --cpu FORWARDING_CPU`" + `: the kernel
symbols of the forwarding CPU's samples, idle left out, grouped by what the code does (measure/perf.go
lists the groups). In a virtual machine without a PMU perf samples with a timer (cpu-clock):
code that runs with interrupts disabled is charged to where they are enabled again, which is
why _raw_spin_unlock_irqrestore is high (the backlog queue's lock, taken with interrupts off).

**Noise.** Other work on the machine (other tests, builds) takes CPU time from the forwarding CPU
and shows as lower peaks and as loss. Every figure is repeated, setups take turns within each
repetition, and ratios are taken within a repetition; the minimum and maximum show the spread.
`
