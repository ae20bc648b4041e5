/* ecmp.c: spreading flows over equal-cost paths by a hash of their 5-tuple.
 *
 * Port 1 faces the hosts; the others are paths towards the same place. A frame that comes to
 * port 1 is hashed by its 5-tuple (addresses, protocol, ports), and the hash picks one of the
 * NBUCKETS entries of the `buckets` table, which says the port to send it out of: all frames
 * of one flow take the same path (no reordering), different flows spread over the paths as
 * the buckets say (the same port in more buckets is a heavier path; a bucket of port 0 drops).
 * A frame that comes from a path goes to port 1. Frames are not changed: the paths join the
 * same two hosts' segment.
 *
 * `spread` counts the IPv4 frames the hash sent out of each port (other frames, ARP and IPv6,
 * all hash alike and take bucket 0's port, uncounted).
 *
 * Table layouts, as `trellis table` writes them (hex bytes in memory order, x86/arm64):
 *   buckets  key __u32 bucket (0..7), value __u32 port    (little-endian)
 *   spread   key __u32 port,          value __u64 frames  (little-endian)
 * e.g. bucket 5 to port 3:  trellis table ebpf-ecmp s1 buckets set 05000000 03000000
 */
#include "trellis.h"

#define NBUCKETS 8

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NBUCKETS);
	__type(key, __u32);
	__type(value, __u32);
} buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRELLIS_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u64);
} spread SEC(".maps");

/* fnv1a folds n bytes into a 32-bit FNV-1a hash. */
static __always_inline __u32 fnv1a(__u32 h, const __u8 *p, int n)
{
#pragma unroll
	for (int i = 0; i < n; i++) {
		h ^= p[i];
		h *= 16777619;
	}
	return h;
}

/* flow_hash hashes an IPv4 frame's 5-tuple (ports only for TCP and UDP); other frames (ARP, IPv6)
 * hash to 0. */
static __always_inline __u32 flow_hash(struct __sk_buff *skb, int *ipv4)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || eth->h_proto != trellis_htons(ETH_P_IP))
		return 0;
	*ipv4 = 1;
	/* The 5-tuple, copied off the packet: the hash reads only the stack. */
	__u8 tuple[13] = {};
	__builtin_memcpy(tuple, &ip->saddr, 8); /* saddr, daddr */
	tuple[8] = ip->protocol;
	__u8 *ports = (void *)ip + ip->ihl * 4;
	if ((ip->protocol == 6 || ip->protocol == 17) && !(ip->frag_off & trellis_htons(0x1fff)) &&
	    (void *)(ports + 4) <= end)
		__builtin_memcpy(tuple + 9, ports, 4);
	__u32 h = fnv1a(2166136261, tuple, sizeof(tuple));
	return h ^ (h >> 16);
}

TRELLIS_PROGRAM int ecmp(struct __sk_buff *skb)
{
	if (trellis_in_port(skb) != 1)
		return trellis_send(skb, 1);
	int ipv4 = 0;
	__u32 bucket = flow_hash(skb, &ipv4) % NBUCKETS;
	__u32 *port = bpf_map_lookup_elem(&buckets, &bucket);
	if (!port || !*port)
		return TRELLIS_DROP;
	__u32 out = *port;
	__u64 *n = bpf_map_lookup_elem(&spread, &out);
	if (n && ipv4)
		__sync_fetch_and_add(n, 1);
	return trellis_send(skb, out);
}

TRELLIS_LICENSE;
