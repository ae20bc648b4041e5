// SPDX-License-Identifier: GPL-2.0
//
// shortbridge: the whole data plane of a point-to-point virtual link.
//
// One copy of this program sits on the tc ingress of each of the two ports
// (host-side veth ends) of a link and hands every frame to the other port.
// There is no learning and no table lookup: a link has exactly two ends, so
// the destination is a load-time constant.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

// Set by the loader before the program is loaded. "volatile const" puts
// them in .rodata, which the verifier treats as known constants, so each
// port gets its own specialised program and no map lookup is needed.
volatile const __u32 peer_ifindex = 0;
volatile const __u8 deliver_peer = 0;

SEC("tc")
int shortbridge(struct __sk_buff *skb)
{
	// No parsing at all: ARP, IPv6, LLDP, any ethertype must cross the
	// link untouched, exactly like a cable would.
	if (deliver_peer)
		// Straight into the other port's veth peer inside the node's
		// namespace (its ingress), skipping the other port's egress
		// path and the extra backlog round: the fastest path.
		return bpf_redirect_peer(peer_ifindex, 0);
	// Out of the other port's egress, so that a qdisc there (a rate
	// shaper for this link) still sees and shapes the frame.
	return bpf_redirect(peer_ifindex, 0);
}

// GPL: the program runs inside the kernel, and a GPL licence keeps every
// helper (including the GPL-only ones) available should it ever grow.
char LICENSE[] SEC("license") = "GPL";
