// SPDX-License-Identifier: GPL-2.0
//
// delay: the way of a port's frames through a delay (netem, or trellis's
// user-space delay line) and back.
//
// A port whose node's frames are delayed has a veth pair of its own in the
// substrate, its delay pair: a hold end, where the frames wait (under netem
// on its egress, or in the delay line's socket on its ingress), and a return
// end, where they come out when their time has come.
//
//   - delay_hold sits on the port's tc ingress: a frame the node sent goes
//     to the hold end (hold_flags says egress, for netem, or ingress, for
//     the delay line's socket).
//   - delay_return sits on the return end's tc ingress: a frame whose time
//     has come goes back into the port's ingress, marked, and the port's
//     programs pass it on to the forwarding program as if it had just come
//     from the node. The mark is taken off there (delay_hold), so nothing
//     beyond the port sees it.
//
// delay_hold and the impairment program may run in either order: a returning
// frame passes the impairment program untouched (it was impaired on its way
// in, or will be now), and a duplicate (DUP_MARK) passes delay_hold to have
// its mark taken off by the impairment program, which then sends it here
// again, so that it is delayed once, like the original.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#define DUP_MARK 0x54524450 // "TRDP", impair.c
#define RET_MARK 0x5452444c // "TRDL", also in impair.c

volatile const __u32 hold_ifindex = 0;
volatile const __u32 hold_flags = 0; // 0: egress (netem); BPF_F_INGRESS: the delay line
volatile const __u32 port_ifindex = 0;

SEC("tc")
int delay_hold(struct __sk_buff *skb)
{
	if (skb->mark == RET_MARK) {
		skb->mark = 0;
		return TC_ACT_UNSPEC; // its time has come: on to the forwarding program
	}
	if (skb->mark == DUP_MARK)
		return TC_ACT_UNSPEC; // the impairment program's: it comes back unmarked
	return bpf_redirect(hold_ifindex, hold_flags);
}

SEC("tc")
int delay_return(struct __sk_buff *skb)
{
	skb->mark = RET_MARK;
	return bpf_redirect(port_ifindex, BPF_F_INGRESS);
}

char LICENSE[] SEC("license") = "GPL";
