/* l3.c: IPv4 forwarding by longest-prefix match, in a node's own data plane.
 *
 * The `routes` table maps a destination prefix to a next hop: the port to send the frame out
 * of and the Ethernet address of the neighbour behind it. A frame whose destination matches
 * no route is dropped (and counted); a route with port 0 hands the frame to the node's own
 * kernel (its addresses, its daemons). Frames that are not IPv4 (ARP) go to the node's kernel
 * too, which answers for its addresses as any host does.
 *
 * Forwarding a frame: the TTL goes down by one (the header checksum follows it), a frame that
 * would leave with TTL 0 is dropped, the new source Ethernet address is the one the frame was
 * sent to (the node's own on the port it came in), the destination is the next hop's.
 *
 * Table layouts, as `trellis table` writes them (hex bytes in memory order, x86/arm64):
 *   key   struct route_key  { __u32 prefixlen (little-endian); __u8 addr[4] (network order) }
 *   value struct next_hop   { __u8 mac[6]; __u16 port (little-endian) }
 * e.g. 10.0.2.0/24 via port 2 to 02:aa:bb:cc:dd:ee:
 *   trellis table ebpf-l3 s1 routes set 18000000.0a000200 02aabbccddee.0200
 */
#include "trellis.h"

struct route_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct next_hop {
	__u8 mac[6];
	__u16 port;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct route_key);
	__type(value, struct next_hop);
} routes SEC(".maps");

/* counters: 0 frames forwarded, 1 dropped for want of a route, 2 dropped for their TTL. */
enum { FORWARDED, NO_ROUTE, TTL_OUT, NCOUNTERS };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *n = bpf_map_lookup_elem(&counters, &what);
	if (n)
		__sync_fetch_and_add(n, 1);
}

TRELLIS_PROGRAM int l3(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || eth->h_proto != trellis_htons(ETH_P_IP))
		return TRELLIS_TO_NODE;

	struct route_key key = {.prefixlen = 32};
	__builtin_memcpy(key.addr, &ip->daddr, sizeof(key.addr));
	struct next_hop *hop = bpf_map_lookup_elem(&routes, &key);
	if (!hop) {
		count(NO_ROUTE);
		return TRELLIS_DROP;
	}
	if (hop->port == 0)
		return TRELLIS_TO_NODE;
	if (ip->ttl <= 1) {
		count(TTL_OUT);
		return TRELLIS_DROP;
	}

	/* TTL down by one: the checksum, a ones' complement sum, goes up by as much (RFC 1624). */
	__u32 sum = ip->check + trellis_htons(0x0100);
	ip->check = (__u16)(sum + (sum >> 16));
	ip->ttl--;

	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, hop->mac, ETH_ALEN);
	count(FORWARDED);
	return trellis_send(skb, hop->port);
}

TRELLIS_LICENSE;
