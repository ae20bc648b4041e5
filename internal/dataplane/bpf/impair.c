// SPDX-License-Identifier: GPL-2.0
//
// impair: loss, duplication and corruption of the frames a node sends on one
// of its interfaces, so that these link impairments work on every kernel
// (netem is not on all of them).
//
// One copy sits on the tc ingress of a port (the substrate-side veth end of
// the interface), at a priority that runs it before the filter that forwards
// the frame (shortbridge, EGRE encap) or, on a LAN port, before the bridge
// takes the frame. It never forwards anything itself: a frame goes on to the
// next filter (TC_ACT_UNSPEC) or is dropped (TC_ACT_SHOT).
//
// The percentages live in a map, not in .rodata, so that they change live
// with one map update and no reattach.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

// Marks a duplicate while it re-enters the port (see impair below). Frames
// from a node never carry a mark here: crossing from the node's namespace
// into the substrate's scrubs it (skb_scrub_packet), and taps have none.
#define DUP_MARK 0x54524450 // "TRDP"

// Marks a frame coming back from its delay (delay.c) into the port: it was
// impaired on its way to the delay, or will be after delay_hold takes the
// mark off, so it passes here untouched, mark and all.
#define RET_MARK 0x5452444c // "TRDL"

// include/linux/skbuff.h
#define CHECKSUM_PARTIAL 3

// Probabilities as thresholds: an event happens when a uniform random u32 is
// below the threshold, so 0 is never and 1 << 32 is always.
struct impair_config {
	__u64 loss;      // lose a frame
	__u64 loss_corr; // repeat the previous frame's loss outcome
	__u64 duplicate; // send a frame twice
	__u64 corrupt;   // flip one bit of a frame
};

// Loss outcome of the last frame, for correlated loss. Shared by all CPUs:
// the link is one sequence of frames. Unlocked: two CPUs racing may both
// read an outcome one frame old, which only blurs the correlation a little.
struct impair_state {
	__u32 last_lost;
	__u32 pad;
};

// Counter slots of impair_stats.
enum {
	IMPAIR_FRAMES = 0,     // frames seen, duplicates included
	IMPAIR_DROPPED = 1,    // frames lost
	IMPAIR_DUPLICATED = 2, // duplicates sent
	IMPAIR_CORRUPTED = 3,  // frames with a bit flipped
	IMPAIR_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct impair_config);
} impair_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct impair_state);
} impair_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IMPAIR_MAX);
	__type(key, __u32);
	__type(value, __u64);
} impair_stats SEC(".maps");

// The few fields of the kernel's struct sk_buff that corruption reads,
// relocated against the running kernel's BTF (CO-RE): the uapi __sk_buff
// does not show how far the checksum is done.
struct sk_buff___impair {
	__u16 mac_header;
	__u8 ip_summed : 2;
	__u16 csum_start;
} __attribute__((preserve_access_index));

// Weak: kernels before 6.2 lack it (Debian 12's 6.1), and the program loads
// there without it (see corrupt).
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&impair_stats, &slot);

	if (v)
		*v += 1; // per-CPU slot: no other writer
}

static __always_inline int chance(__u64 threshold)
{
	return (__u64)bpf_get_prandom_u32() < threshold;
}

// lost decides whether this frame is lost. Without correlation every frame
// is an independent draw. With correlation c, a frame repeats the previous
// frame's outcome with probability c and is a fresh draw otherwise: the
// loss rate stays exactly the configured one (netem's "loss P% C%" mixes
// random numbers instead, which lowers the rate it delivers), the lag-1
// correlation of the outcomes is c, and loss bursts last 1/((1-c)(1-p))
// frames on average instead of 1/(1-p).
static __always_inline int lost(const struct impair_config *cfg)
{
	struct impair_state *st;
	__u32 zero = 0;
	int lose;

	if (!cfg->loss)
		return 0;
	if (!cfg->loss_corr)
		return chance(cfg->loss);
	st = bpf_map_lookup_elem(&impair_state, &zero);
	if (!st)
		return chance(cfg->loss);
	if (chance(cfg->loss_corr))
		return st->last_lost;
	lose = chance(cfg->loss);
	if (st->last_lost != (__u32)lose)
		st->last_lost = lose; // written only on a change: less cache traffic
	return lose;
}

// corrupt flips one random bit of the frame, as netem does, and makes sure
// the receiver can tell.
//
// netem flips a bit anywhere in the linear part of the frame, after
// finishing a pending checksum in software (skb_checksum_help) so that the
// receiver's check fails. A tc program cannot finish a checksum: the frame
// stays CHECKSUM_PARTIAL whatever it writes, a receiver behind a veth trusts
// such a frame without checking, and whoever computes the checksum later
// computes it over the flipped bit. A flipped bit inside the range of a
// pending checksum would therefore reach the application unnoticed. So:
//
//   - a frame whose checksums are final (CHECKSUM_NONE, _UNNECESSARY,
//     _COMPLETE: ICMP, ARP, forwarded and raw frames...) gets its bit
//     anywhere in the linear part, like netem; CHECKSUM_UNNECESSARY is
//     reset to CHECKSUM_NONE so that the receiver checks instead of
//     trusting, and a CHECKSUM_COMPLETE sum is updated with the data so
//     that it shows the flip;
//   - a CHECKSUM_PARTIAL frame (TCP and UDP from a local socket) gets its
//     bit in front of the pending checksum's range (csum_start): in the
//     Ethernet and IP headers, whose own checks are final. A flip in an IPv4
//     header fails its header checksum at the receiver; one in the Ethernet
//     destination or type makes the receiver drop the frame; one in the
//     source address is harmless, as with netem.
//
// Either way corrupted data never reaches an application as if it were
// good, which is what netem's corruption tests rely on.
//
// A kernel without bpf_cast_to_kern_ctx (before 6.2) does not say whether a
// checksum is pending: there trellis refuses corruption (kernel.go), and
// this program, which still loads for loss and duplication, corrupts
// nothing.
static __always_inline int corrupt(struct __sk_buff *skb)
{
	__u32 span = skb->data_end - skb->data; // the linear part
	__u64 flags = BPF_F_INVALIDATE_HASH;
	struct sk_buff___impair *k = 0;
	__u32 off;
	__u8 b;

	if (bpf_cast_to_kern_ctx)
		k = bpf_cast_to_kern_ctx(skb);
	if (!k)
		return 0;
	if (BPF_CORE_READ_BITFIELD(k, ip_summed) == CHECKSUM_PARTIAL) {
		// Offset of the checksum's range in the frame: at tc ingress
		// the frame starts at the MAC header.
		__s32 start = (__s32)k->csum_start - (__s32)k->mac_header;

		if (start > 0 && (__u32)start < span)
			span = start;
		else if (span > ETH_HLEN)
			span = ETH_HLEN;
	}
	if (span == 0)
		return 0;
	off = bpf_get_prandom_u32() % span;
	if (bpf_skb_load_bytes(skb, off, &b, 1) < 0)
		return 0;
	b ^= 1 << (bpf_get_prandom_u32() & 7);
	// A CHECKSUM_COMPLETE sum covers the frame from its network header on;
	// the Ethernet header is outside it.
	if (off >= ETH_HLEN)
		flags |= BPF_F_RECOMPUTE_CSUM;
	if (bpf_skb_store_bytes(skb, off, &b, 1, flags) < 0)
		return 0;
	bpf_csum_level(skb, BPF_CSUM_LEVEL_RESET);
	return 1;
}

SEC("tc")
int impair(struct __sk_buff *skb)
{
	const struct impair_config *cfg;
	__u32 zero = 0;
	int dup = 0;

	if (skb->mark == RET_MARK)
		return TC_ACT_UNSPEC;
	// A duplicate made below comes back through this program: take the
	// mark off (nothing after us should see it) and do not duplicate it
	// again. Like netem's duplicate, it is otherwise a frame like any other:
	// it may be lost or corrupted.
	if (skb->mark == DUP_MARK) {
		skb->mark = 0;
		dup = 1;
	}
	cfg = bpf_map_lookup_elem(&impair_config, &zero);
	if (!cfg)
		return TC_ACT_UNSPEC;
	count(IMPAIR_FRAMES);

	if (lost(cfg)) {
		count(IMPAIR_DROPPED);
		return TC_ACT_SHOT;
	}

	// The copy is made before this frame is corrupted, and sent back into
	// the port's own ingress: it goes through this program again, then
	// through the forwarding filter (or the bridge) and any shaper beyond,
	// exactly like a frame the node sent. It arrives after the original,
	// through the receive backlog.
	if (!dup && cfg->duplicate && chance(cfg->duplicate)) {
		skb->mark = DUP_MARK;
		if (bpf_clone_redirect(skb, skb->ifindex, BPF_F_INGRESS) == 0)
			count(IMPAIR_DUPLICATED);
		skb->mark = 0;
	}

	if (cfg->corrupt && chance(cfg->corrupt) && corrupt(skb))
		count(IMPAIR_CORRUPTED);
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
