/* ecn.c: explicit congestion notification, marking CE on ECN-capable packets when a port's
 * queue is above a threshold, in a two-port wire (port 1 <-> port 2).
 *
 * An eBPF program sees frames one at a time and has no queue of its own to measure: the
 * queue here is a virtual one (a "phantom queue"), kept per outgoing port. Each frame adds
 * its length to the port's backlog, and the backlog drains at the rate the `vq` table gives,
 * as a queue in front of a link of that rate would. The frame is marked if the backlog is
 * above the table's threshold: traffic that would build a queue at that rate gets marks,
 * traffic below it none. It is the link's queue only if the rate is the link's (set it a
 * little below a shaped link's rate to mark before the real queue builds, as HULL does);
 * frames are never delayed or dropped by it. Frames on one port from several CPUs at once
 * update the backlog without a lock: the figure is approximate under such races.
 *
 * A frame is marked when it is IPv4, ECN-capable (ECT(0) or ECT(1) in the ECN field of the
 * TOS byte) and over the threshold: the field becomes CE (11) and the header checksum follows.
 * `counters`: 0 ECN-capable frames seen, 1 frames marked.
 *
 * Table layouts, as `trellis table` writes them (hex bytes in memory order, x86/arm64):
 *   vq  key __u32 0, value struct vq_config { __u64 rate (bytes/s); __u64 threshold (bytes) }
 * e.g. 100 kB/s, marking above 10 kB:
 *   trellis table ebpf-ecn s1 vq set 00000000 a086010000000000.1027000000000000
 * A rate of 0 (the table as it starts) marks nothing.
 */
#include "trellis.h"

struct vq_config {
	__u64 rate;
	__u64 threshold;
};

struct vq_state {
	__u64 backlog; /* bytes */
	__u64 last;    /* ns, when backlog was computed */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vq_config);
} vq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRELLIS_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct vq_state);
} queues SEC(".maps");

enum { ECT_SEEN, MARKED, NCOUNTERS };

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

/* over_threshold adds a frame of len bytes to port's virtual queue and says whether the
 * backlog is then above the threshold. */
static __always_inline int over_threshold(__u32 port, __u32 len)
{
	__u32 zero = 0;
	struct vq_config *cfg = bpf_map_lookup_elem(&vq, &zero);
	struct vq_state *q = bpf_map_lookup_elem(&queues, &port);
	if (!cfg || !q || cfg->rate == 0)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 elapsed = now - q->last;
	__u64 backlog = 0;
	if (elapsed < 1000000000ULL) { /* a queue idle for a second is empty (and no overflow) */
		__u64 drained = elapsed * cfg->rate / 1000000000ULL;
		backlog = q->backlog > drained ? q->backlog - drained : 0;
	}
	backlog += len;
	q->backlog = backlog;
	q->last = now;
	return backlog > cfg->threshold;
}

TRELLIS_PROGRAM int ecn(struct __sk_buff *skb)
{
	__u32 out = trellis_in_port(skb) == 1 ? 2 : 1;
	int over = over_threshold(out, skb->len);

	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || eth->h_proto != trellis_htons(ETH_P_IP))
		return trellis_send(skb, out);
	__u8 ecn = ip->tos & 3;
	if (ecn == 1 || ecn == 2) {
		count(ECT_SEEN);
		if (over) {
			__u16 before = *(__u16 *)ip; /* version and header length, TOS */
			ip->tos |= 3;
			__u16 after = *(__u16 *)ip;
			bpf_l3_csum_replace(skb, sizeof(*eth) + __builtin_offsetof(struct iphdr, check), before, after, 2);
			count(MARKED);
		}
	}
	return trellis_send(skb, out);
}

TRELLIS_LICENSE;
