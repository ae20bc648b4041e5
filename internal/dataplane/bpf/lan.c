// SPDX-License-Identifier: GPL-2.0
//
// lan: the data plane of a LAN (a virtual link of two or more members).
//
// One copy of this program sits on the tc ingress of every member of a LAN:
// the ports (host-side veth ends of node interfaces) and the tunnel devices
// that carry the LAN to other machines. All copies of one LAN share its maps:
//
//   fdb      learnt MAC address -> member (an LRU hash: its size is the
//            table's limit; the least recently used entry makes room)
//   members  the LAN's members, for flooding
//   conf     the number of members and the ageing time
//   stats    per-CPU counters
//
// A frame's source address is learnt (or refreshed, or moved to the member it
// now comes from); a frame to a learnt unicast address goes to that member
// alone; broadcast, multicast and unknown (or aged) destinations are flooded
// to every other member by cloning. Nothing else is parsed: ARP, IPv6 and
// non-IP frames cross as they are. Frames from a tunnel are never sent into
// another tunnel (split horizon: every machine has a tunnel of its own to
// every other, so nothing needs relaying and there can be no loop).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#define MAX_MEMBERS 4096

// Member flags.
#define MEMBER_TUNNEL 1 // a tunnel device to other machines
#define MEMBER_PEER 2	// unicast goes straight into the node (redirect_peer)

// Refresh a learnt entry's time at most this often, so that a busy sender
// does not write the shared entry (and bounce its cache line) per frame.
#define REFRESH_NS 1000000000ULL

// This copy's member: its flags, set by the loader (a constant in .rodata).
volatile const __u32 self_flags = 0;

struct member {
	__u32 ifindex;
	__u32 flags;
};

struct fdb_entry {
	__u32 ifindex;
	__u32 flags; // the member's flags
	__u64 seen;  // bpf_ktime_get_coarse_ns of the last frame from it
};

struct conf {
	__u64 aging_ns;
	__u32 size;
	__u32 pad; // always 0: flood's first pending member (see there)
};

// Counter slots of stats.
enum {
	LAN_UNICAST = 0, // frames sent to their learnt member
	LAN_FLOODED = 1, // frames flooded (broadcast, multicast, unknown)
	LAN_FILTERED = 2, // frames dropped: for their own member, or tunnel to tunnel
	LAN_LEARNT = 3,	 // entries written (new addresses and moves)
	LAN_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096); // the loader sets the LAN's limit
	__type(key, __u64);	   // the MAC address in the low 6 bytes
	__type(value, struct fdb_entry);
} fdb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_MEMBERS);
	__type(key, __u32);
	__type(value, struct member);
} members SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct conf);
} conf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LAN_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &slot);

	if (v)
		*v += 1; // per-CPU slot: no other writer
}

static __always_inline __u64 mac_key(const __u8 *mac)
{
	__u64 k = 0;

	__builtin_memcpy(&k, mac, ETH_ALEN);
	return k;
}

static __always_inline int deliver(__u32 ifindex, __u32 flags)
{
	if (flags & MEMBER_PEER)
		// Into the node itself: skips the port's egress (no shaper on
		// an uncapped link) and a pass through the backlog.
		return bpf_redirect_peer(ifindex, 0);
	// Out of the member's egress: its shaper, or its tunnel.
	return bpf_redirect(ifindex, 0);
}

static __always_inline void learn(__u64 src, __u32 ingress, __u64 now)
{
	struct fdb_entry *e = bpf_map_lookup_elem(&fdb, &src);

	if (e && e->ifindex == ingress && e->flags == self_flags) {
		if (now - e->seen > REFRESH_NS)
			e->seen = now;
		return;
	}
	// New, moved, or its member's flags changed.
	struct fdb_entry n = {.ifindex = ingress, .flags = self_flags, .seen = now};
	bpf_map_update_elem(&fdb, &src, &n, BPF_ANY);
	count(LAN_LEARNT);
}

struct flood_ctx {
	struct __sk_buff *skb;
	__u32 ingress;
	__u32 pending; // the last eligible member found, sent to after the loop
	__u32 pending_flags;
};

static long flood_one(__u64 i, struct flood_ctx *c)
{
	__u32 k = i;
	struct member *m = bpf_map_lookup_elem(&members, &k);

	if (!m)
		return 1;
	if (m->ifindex == 0 || m->ifindex == c->ingress)
		return 0;
	if ((self_flags & MEMBER_TUNNEL) && (m->flags & MEMBER_TUNNEL))
		return 0;
	if (c->pending)
		bpf_clone_redirect(c->skb, c->pending, 0);
	c->pending = m->ifindex;
	c->pending_flags = m->flags;
	return 0;
}

static __always_inline int flood(struct __sk_buff *skb, __u32 ingress, struct conf *cf)
{
	// No member is pending at first: 0, read from the map rather than
	// written as a constant. Kernels before 6.7 verify a bpf_loop callback
	// once, from the state of its first call, and remove what that state
	// cannot reach: with a constant 0 there, the clone in flood_one was dead
	// code, and a flood reached only the last member (Linux 6.1).
	struct flood_ctx c = {.skb = skb, .ingress = ingress, .pending = cf->pad};
	__u32 n = cf->size;

	if (n > MAX_MEMBERS)
		n = MAX_MEMBERS;
	bpf_loop(n, flood_one, &c, 0);
	count(LAN_FLOODED);
	if (!c.pending)
		return TC_ACT_SHOT;
	// The last member gets the frame itself rather than a clone.
	return deliver(c.pending, c.pending_flags);
}

SEC("tc")
int lan(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0, ingress = skb->ifindex;
	struct conf *cf;
	__u64 dst, src, now;

	if ((void *)(eth + 1) > data_end)
		return TC_ACT_SHOT;
	cf = bpf_map_lookup_elem(&conf, &zero);
	if (!cf)
		return TC_ACT_SHOT;
	dst = mac_key(eth->h_dest);
	src = mac_key(eth->h_source);
	now = bpf_ktime_get_coarse_ns();

	// A multicast source address is invalid: forward, never learn it.
	if (!(eth->h_source[0] & 1))
		learn(src, ingress, now);
	if (eth->h_dest[0] & 1)
		return flood(skb, ingress, cf);

	struct fdb_entry *e = bpf_map_lookup_elem(&fdb, &dst);
	if (!e || now - e->seen > cf->aging_ns)
		return flood(skb, ingress, cf);
	if (e->ifindex == ingress ||
	    ((self_flags & MEMBER_TUNNEL) && (e->flags & MEMBER_TUNNEL))) {
		count(LAN_FILTERED);
		return TC_ACT_SHOT;
	}
	count(LAN_UNICAST);
	return deliver(e->ifindex, e->flags);
}

char LICENSE[] SEC("license") = "GPL";
