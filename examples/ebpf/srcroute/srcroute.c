/* srcroute.c: source routing. The sender writes the whole path into the frame, a stack of
 * port numbers, and each switch pops the top one and sends the frame out of that port.
 *
 * The header follows the Ethernet header, whose type says it is there (0x88B5, the IEEE's
 * ethertype for local experiments), and is 8 bytes: the stack's depth, then room for 7 ports,
 * the top of the stack at ports[depth - 1]. The sender pushes the last hop first. Popping
 * lowers the depth and clears the entry; the frame keeps its length (the kernel's helper that
 * shrinks a frame in place, bpf_skb_adjust_room, takes IP frames only), so the host at the
 * end receives the header with depth 0, then what the sender put after it.
 *
 *   | dst | src | 0x88B5 | depth | ports[0] ... ports[6] | payload ...
 *
 * A frame with an empty or malformed stack is dropped and counted in `counters`[1]; frames
 * forwarded count in `counters`[0]. Other frames go to the node's own kernel.
 */
#include "trellis.h"

#define ETH_P_SRCROUTE 0x88B5
#define SR_MAX_DEPTH 7

struct srcroute {
	__u8 depth;
	__u8 ports[SR_MAX_DEPTH];
};

/* Byte k of the header, read as a __u64 in the machine's order. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BYTE_SHIFT(k) (8 * (k))
#else
#define BYTE_SHIFT(k) (8 * (7 - (k)))
#endif
#define BYTE_OF(h, k) ((__u8)((h) >> BYTE_SHIFT(k)))
#define BYTE_MASK(k) (0xffULL << BYTE_SHIFT(k))

enum { FORWARDED, BAD_STACK, NCOUNTERS };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline int count(__u32 what, int verdict)
{
	__u64 *n = bpf_map_lookup_elem(&counters, &what);
	if (n)
		__sync_fetch_and_add(n, 1);
	return verdict;
}

TRELLIS_PROGRAM int srcroute(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct srcroute *sr = (void *)(eth + 1);

	if ((void *)(sr + 1) > end || eth->h_proto != trellis_htons(ETH_P_SRCROUTE))
		return TRELLIS_TO_NODE;
	/* The header as one 64-bit word: the verifier lets a shift depend on the depth, where it
	 * would refuse an index into the packet or the stack that does. */
	__u64 h;
	__builtin_memcpy(&h, sr, sizeof(h));
	__u32 depth = BYTE_OF(h, 0);
	if (depth == 0 || depth > SR_MAX_DEPTH)
		return count(BAD_STACK, TRELLIS_DROP);
	__u8 port = BYTE_OF(h, depth); /* ports[depth - 1] is the header's byte depth */
	h &= ~(BYTE_MASK(depth) | BYTE_MASK(0));
	h |= (__u64)(depth - 1) << BYTE_SHIFT(0);
	if (bpf_skb_store_bytes(skb, sizeof(*eth), &h, sizeof(h), 0) < 0)
		return count(BAD_STACK, TRELLIS_DROP);
	return count(FORWARDED, trellis_send(skb, port));
}

TRELLIS_LICENSE;
