/* flowcount.c: a two-port wire that counts every IPv4 flow crossing it, read while it runs.
 *
 * Whatever comes to port 1 leaves through port 2 and the other way round, unchanged (ARP too).
 * Each IPv4 frame is counted in the `flows` table under its 5-tuple: the frames and the bytes
 * (the whole Ethernet frame) of that flow, one direction. A flow the table has no room for is
 * counted in `overflow`. `trellis table NET s1 flows dump` reads the counts at any time.
 *
 * Table layouts, as `trellis table` prints them (hex bytes in memory order, x86/arm64):
 *   key   struct flow_key { __u8 saddr[4]; __u8 daddr[4];  (network order)
 *                           __u16 sport; __u16 dport;      (network order; 0 without ports)
 *                           __u8 proto; __u8 pad[3]; }
 *   value struct flow_count { __u64 frames; __u64 bytes; } (little-endian)
 * e.g. UDP 10.0.0.1:40000 -> 10.0.0.2:5000, 3 frames of 60 bytes:
 *   0a0000010a0000029c401388 11000000  0300000000000000b400000000000000
 */
#include "trellis.h"
#include <linux/in.h>

struct flow_key {
	__u8 saddr[4];
	__u8 daddr[4];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct flow_count {
	__u64 frames;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct flow_key);
	__type(value, struct flow_count);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} overflow SEC(".maps");

static __always_inline void count_flow(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || eth->h_proto != trellis_htons(ETH_P_IP))
		return;
	struct flow_key key = {.proto = ip->protocol};
	__builtin_memcpy(key.saddr, &ip->saddr, 4);
	__builtin_memcpy(key.daddr, &ip->daddr, 4);
	/* TCP and UDP both begin with the source and destination ports; a fragment after the
	 * first has no ports and counts under port 0. */
	__u16 *ports = (void *)ip + ip->ihl * 4;
	if ((ip->protocol == IPPROTO_TCP || ip->protocol == IPPROTO_UDP) &&
	    !(ip->frag_off & trellis_htons(0x1fff)) && (void *)(ports + 2) <= end) {
		key.sport = ports[0];
		key.dport = ports[1];
	}

	struct flow_count *c = bpf_map_lookup_elem(&flows, &key);
	if (c) {
		__sync_fetch_and_add(&c->frames, 1);
		__sync_fetch_and_add(&c->bytes, skb->len);
		return;
	}
	struct flow_count first = {.frames = 1, .bytes = skb->len};
	/* BPF_NOEXIST: a frame of the same flow on another CPU may have made the entry meanwhile;
	 * then count into it. */
	if (bpf_map_update_elem(&flows, &key, &first, BPF_NOEXIST) == 0)
		return;
	c = bpf_map_lookup_elem(&flows, &key);
	if (c) {
		__sync_fetch_and_add(&c->frames, 1);
		__sync_fetch_and_add(&c->bytes, skb->len);
		return;
	}
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&overflow, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
}

TRELLIS_PROGRAM int flowcount(struct __sk_buff *skb)
{
	count_flow(skb);
	return trellis_send(skb, trellis_in_port(skb) == 1 ? 2 : 1);
}

TRELLIS_LICENSE;
