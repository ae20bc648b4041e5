// Package measure is the bench's measuring equipment, independent of what it measures: a
// traffic generator (packet sockets fed with sendmmsg at a controlled rate), a sink that counts
// and drops frames in eBPF, trials that offer a rate through a path for a time and count what
// arrives, the CPU time of the NET_RX softirq (eBPF on the softirq tracepoints), a CPU's busy
// time, perf profiles grouped by what the kernel code does, and the user-space relay that one
// setup forwards with. The setups it measures are built by package setup; the figures go into
// package result.
package measure
