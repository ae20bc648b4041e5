// SPDX-License-Identifier: GPL-2.0
//
// engines: the classifier and the dispatcher of a node with parallel
// forwarding engines (PdP; docs/design.md, decision 12).
//
// The node itself (the control node) runs the routing daemons. Each forwarding
// engine (FE) is a network namespace with copies of the node's interfaces
// (same MACs, same addresses) and of its routes and neighbours.
//
// engines_classify sits on the tc egress of each of the node's ports: every
// frame on its way into the node passes it. Control traffic (broadcast and
// multicast frames, ARP, frames to one of the node's own addresses or to a
// link-local one, non-IP frames unless a flow key is given for them) goes on
// into the node. Transit frames go to one FE, chosen by a slot table: slot
// = a counter (round-robin, weighted) or a hash of the flow fields (flow), so
// that a flow stays on one FE. ARP replies and IPv6 neighbour advertisements
// are copied to every FE too, so that an FE resolves its next hops itself.
//
// engines_dispatch sits on the tc ingress of each FE's substrate end: what an
// FE sends out of an interface enters the node's port for that interface as
// if the node had sent it (bpf_redirect with BPF_F_INGRESS), and leaves
// through the link's connector, impairments and tunnels, with the node's MAC.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_FES 64
#define MAX_SLOTS 4096
#define MAX_KEY 16

// Modes of config.mode.
#define MODE_COUNTER 0 // slot = a counter: round-robin or weighted
#define MODE_FLOW 1    // slot = hash of the flow fields

// Bits of config.fields: the flow fields hashed for IP frames.
#define F_SRC 1
#define F_DST 2
#define F_PROTO 4
#define F_SPORT 8
#define F_DPORT 16

struct config {
	__u32 mode;
	__u32 nslots; // entries of slots in use, 1..MAX_SLOTS; 0: every frame to the control node
	__u32 nfes;
	__u32 fields;
	__u32 offset; // non-IP frames: bytes [offset, offset+length) are the flow key
	__u32 length; // 0: non-IP frames go to the control node
	__u32 pad;
	// The FEs are taken as there until this time (CLOCK_MONOTONIC, ns): the helper that holds
	// them pushes it forward while it lives. After it, every frame goes to the control node,
	// which forwards transit frames itself.
	__u64 alive_until;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

// The FE of each slot.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} slots SEC(".maps");

// The round-robin counter, shared by every CPU and port of the node.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counter SEC(".maps");

struct fe_key {
	__u32 port; // ifindex of the node's port
	__u32 fe;
};

// The substrate end of FE fe's copy of the interface behind port.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FES * 64);
	__type(key, struct fe_key);
	__type(value, __u32);
} fe_ports SEC(".maps");

// The node's port for an FE's substrate end (the dispatcher's table).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FES * 64);
	__type(key, __u32);
	__type(value, __u32);
} out_ports SEC(".maps");

// The node's own addresses, IPv4 ones mapped (::ffff:a.b.c.d).
struct addr {
	__u8 b[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct addr);
	__type(value, __u8);
} local SEC(".maps");

// Frames per destination: index fe, or MAX_FES for the control node.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_FES + 1);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

// A port's rate cap (the link's `rate`, towards the node): a token bucket that every frame
// the classifier sees takes from, control node's and engines' alike, so that the cap holds for
// their sum. Frames over the cap are dropped (a policer: the frames that go to an engine never
// reach the port's shaper).
struct police {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 rate;   // bytes per second
	__u64 burst;  // bytes
	__u64 tokens; // bytes times 10^9
	__u64 last;   // ns, CLOCK_MONOTONIC
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FES * 64);
	__type(key, __u32);
	__type(value, struct police);
} police SEC(".maps");

// Frames dropped by each port's rate cap (one counter for all ports).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} policed SEC(".maps");

// over_rate takes the frame's bytes from its port's bucket; true when it has not enough.
static __always_inline int over_rate(struct __sk_buff *skb)
{
	__u32 port = skb->ifindex;
	struct police *p = bpf_map_lookup_elem(&police, &port);
	if (!p)
		return 0;
	__u64 now = bpf_ktime_get_ns(), cost = (__u64)skb->len * 1000000000ULL;
	int over = 0;
	bpf_spin_lock(&p->lock);
	__u64 elapsed = now > p->last ? now - p->last : 0;
	if (elapsed > 1000000000ULL)
		elapsed = 1000000000ULL;
	__u64 cap = p->burst * 1000000000ULL, t = p->tokens + elapsed * p->rate;
	if (t > cap)
		t = cap;
	if (t >= cost)
		t -= cost;
	else
		over = 1;
	p->tokens = t;
	p->last = now;
	bpf_spin_unlock(&p->lock);
	if (over) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&policed, &zero);
		if (n)
			*n += 1;
	}
	return over;
}

static __always_inline void count(__u32 idx)
{
	__u64 *n = bpf_map_lookup_elem(&stats, &idx);
	if (n)
		*n += 1;
}

static __always_inline int to_control(void)
{
	count(MAX_FES);
	return TC_ACT_OK;
}

static __always_inline __u32 mix(__u32 h, __u32 v)
{
	// murmur3's round and finaliser: cheap, and every input bit moves many output bits.
	v *= 0xcc9e2d51;
	v = (v << 15) | (v >> 17);
	v *= 0x1b873593;
	h ^= v;
	h = (h << 13) | (h >> 19);
	return h * 5 + 0xe6546b64;
}

static __always_inline __u32 fmix(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	return h ^ (h >> 16);
}

// copy_to_fes sends a copy of the frame to every FE's copy of the port.
static __always_inline void copy_to_fes(struct __sk_buff *skb, struct config *cfg)
{
	for (__u32 i = 0; i < MAX_FES; i++) {
		if (i >= cfg->nfes)
			break;
		struct fe_key k = {.port = skb->ifindex, .fe = i};
		__u32 *dev = bpf_map_lookup_elem(&fe_ports, &k);
		if (dev)
			bpf_clone_redirect(skb, *dev, 0);
	}
}

static __always_inline int is_local(struct addr *a)
{
	return bpf_map_lookup_elem(&local, a) != 0;
}

// hash_ports mixes the transport ports at offset off, as the fields ask.
static __always_inline __u32 hash_ports(struct __sk_buff *skb, __u32 h, __u32 off, __u8 proto, __u32 fields)
{
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP && proto != IPPROTO_SCTP)
		return h;
	__u16 ports[2];
	if (bpf_skb_load_bytes(skb, off, ports, 4) < 0)
		return h;
	if (fields & F_SPORT)
		h = mix(h, ports[0]);
	if (fields & F_DPORT)
		h = mix(h, (__u32)ports[1] << 16);
	return h;
}

static __always_inline __u32 hash_addr(__u32 h, struct addr *a, int v4)
{
	__u32 *w = (__u32 *)a->b;
	if (v4)
		return mix(h, w[3]);
	return mix(mix(mix(mix(h, w[0]), w[1]), w[2]), w[3]);
}

// ipv4 classifies an IPv4 frame: -1 for the control node, else the flow hash.
static __always_inline __s64 ipv4(struct __sk_buff *skb, struct config *cfg)
{
	__u8 hdr[20];
	if (bpf_skb_load_bytes(skb, ETH_HLEN, hdr, sizeof(hdr)) < 0)
		return -1;
	struct addr src = {.b = {[10] = 0xff, [11] = 0xff}}, dst = src;
	__builtin_memcpy(&src.b[12], &hdr[12], 4);
	__builtin_memcpy(&dst.b[12], &hdr[16], 4);
	if (is_local(&dst) || (hdr[16] & 0xf0) == 0xe0 || hdr[16] == 255)
		return -1;
	__u32 h = 0x9747b28c;
	if (cfg->fields & F_SRC)
		h = hash_addr(h, &src, 1);
	if (cfg->fields & F_DST)
		h = hash_addr(h, &dst, 1);
	if (cfg->fields & F_PROTO)
		h = mix(h, hdr[9]);
	__u16 frag = ((__u16)hdr[6] << 8 | hdr[7]) & 0x3fff; // more fragments, offset
	if (!frag)
		h = hash_ports(skb, h, ETH_HLEN + (hdr[0] & 0xf) * 4, hdr[9], cfg->fields);
	return fmix(h);
}

// ipv6 classifies an IPv6 frame as ipv4 does; neighbour advertisements are
// also copied to every FE.
static __always_inline __s64 ipv6(struct __sk_buff *skb, struct config *cfg)
{
	__u8 hdr[40];
	if (bpf_skb_load_bytes(skb, ETH_HLEN, hdr, sizeof(hdr)) < 0)
		return -1;
	__u8 next = hdr[6];
	if (next == 58) { // ICMPv6
		__u8 type;
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 40, &type, 1) == 0 && type == 136)
			copy_to_fes(skb, cfg);
	}
	struct addr src, dst;
	__builtin_memcpy(src.b, &hdr[8], 16);
	__builtin_memcpy(dst.b, &hdr[24], 16);
	if (dst.b[0] == 0xff || (dst.b[0] == 0xfe && (dst.b[1] & 0xc0) == 0x80) || is_local(&dst))
		return -1;
	__u32 h = 0x9747b28c;
	if (cfg->fields & F_SRC)
		h = hash_addr(h, &src, 0);
	if (cfg->fields & F_DST)
		h = hash_addr(h, &dst, 0);
	if (cfg->fields & F_PROTO)
		h = mix(h, next);
	return fmix(hash_ports(skb, h, ETH_HLEN + 40, next, cfg->fields));
}

// other classifies a frame that is neither IP nor ARP by its key bytes.
static __always_inline __s64 other(struct __sk_buff *skb, struct config *cfg)
{
	__u8 key[MAX_KEY] = {};
	__u32 len = cfg->length, off = cfg->offset;
	if (len == 0 || len > MAX_KEY || off > 128)
		return -1;
	if (bpf_skb_load_bytes(skb, off, key, len) < 0)
		return -1;
	__u32 *w = (__u32 *)key;
	return fmix(mix(mix(mix(mix(0x9747b28c, w[0]), w[1]), w[2]), w[3]));
}

SEC("tc")
int engines_classify(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct ethhdr eth;
	if (!cfg || cfg->nslots == 0 || cfg->nslots > MAX_SLOTS || bpf_ktime_get_ns() > cfg->alive_until ||
	    bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) < 0)
		return to_control();
	if (over_rate(skb))
		return TC_ACT_SHOT;
	if (eth.h_dest[0] & 1) // broadcast, multicast
		return to_control();
	__s64 h;
	switch (eth.h_proto) {
	case bpf_htons(ETH_P_ARP): {
		__u16 op;
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 6, &op, 2) == 0 && op == bpf_htons(2))
			copy_to_fes(skb, cfg);
		return to_control();
	}
	case bpf_htons(ETH_P_IP):
		h = ipv4(skb, cfg);
		break;
	case bpf_htons(ETH_P_IPV6):
		h = ipv6(skb, cfg);
		break;
	default:
		h = other(skb, cfg);
	}
	if (h < 0)
		return to_control();
	__u32 slot;
	if (cfg->mode == MODE_FLOW) {
		slot = (__u32)h % cfg->nslots;
	} else {
		__u64 *c = bpf_map_lookup_elem(&counter, &zero);
		if (!c)
			return to_control();
		slot = (__u32)(__sync_fetch_and_add(c, 1) % cfg->nslots);
	}
	__u32 *fe = bpf_map_lookup_elem(&slots, &slot);
	if (!fe)
		return to_control();
	struct fe_key k = {.port = skb->ifindex, .fe = *fe};
	__u32 *dev = bpf_map_lookup_elem(&fe_ports, &k);
	if (!dev) // the FE is not there (yet): the node forwards it itself
		return to_control();
	count(*fe < MAX_FES ? *fe : MAX_FES);
	return bpf_redirect(*dev, 0);
}

SEC("tc")
int engines_dispatch(struct __sk_buff *skb)
{
	__u32 in = skb->ifindex;
	__u32 *port = bpf_map_lookup_elem(&out_ports, &in);
	if (!port)
		return TC_ACT_SHOT;
	return bpf_redirect(*port, BPF_F_INGRESS);
}

char LICENSE[] SEC("license") = "GPL";
