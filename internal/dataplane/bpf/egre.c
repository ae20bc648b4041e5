// SPDX-License-Identifier: GPL-2.0
//
// egre: a virtual link carried between machines as Ethernet over keyed GRE
// over IPv4, byte for byte the wire format of a Linux "gretap" device with a
// key, so that a host with a kernel gretap device interoperates:
//
//   outer Ethernet (type 0x0800)
//   outer IPv4     (IHL 5, DF, TTL 64, protocol 47, id 0)
//   GRE            (flags 0x2000 = key present, protocol 0x6558, 32-bit key)
//   inner Ethernet frame, unchanged
//
// egre_encap sits on the tc ingress of a tunnel port (the substrate-side veth
// end of a node interface whose link continues on another machine) and sends
// every frame, encapsulated, out of the underlay device. egre_decap sits on
// the tc ingress of the machine's underlay device (one per machine) and hands
// the inner frame of every EGRE packet for a known (key, source) pair to its
// port (or straight into the node behind it). It also vets VXLAN packets for
// the kernel's VXLAN devices of trellis (vxlan_check): one for a VNI of this
// machine's tunnels goes on only if it comes from a machine of that tunnel.
// All other traffic passes untouched.
//
// VLAN tags, which the kernel keeps out of band (skb metadata) on both
// sides, travel inside the inner frame as gretap would carry them.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// From <sys/socket.h>, <linux/in.h> and <linux/if_packet.h>, which do not
// build for the bpf target without libc headers.
#define AF_INET 2
#define IPPROTO_GRE 47
#define IPPROTO_UDP 17
#define PACKET_HOST 0

#define ETH_P_TEB 0x6558     // transparent Ethernet bridging (GRE protocol)
#define GRE_KEY_PRESENT 0x2000 // GRE flags/version: K bit, version 0
#define IP_DF 0x4000
#define IP_MF_OFFSET 0x3fff
#define IP_OFFSET 0x1fff
#define EGRE_TTL 64

// Outer IPv4 + GRE with key: the room adjust_room opens after the outer
// Ethernet header, without the inner Ethernet header.
#define OUTER_L3L4_LEN (20 + 8)
// Everything in front of the inner frame.
#define EGRE_HLEN (ETH_HLEN + OUTER_L3L4_LEN) // 42

// BPF_F_ADJ_ROOM_DECAP_L3_IPV4/_IPV6 (Linux 6.3), which the uapi headers
// this is built with may lack (they are enum constants, not macros, so
// #ifndef cannot tell). Values checked against the kernel's BTF. Earlier
// kernels refuse every adjust_room call that has them (-EINVAL): see
// decap_l3 below.
#define ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7)
#define ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)
// What an IPv6 header is longer than an IPv4 one (bpf_skb_change_proto).
#define IP6_MORE (40 - 20)

#define VLAN_HLEN 4
#define MAX_VLAN_TAGS 2

// Constants set by the loader before the program is loaded ("volatile const"
// puts them in .rodata, which the verifier treats as known values). All
// addresses and the key are in network byte order, as on the wire.
volatile const __be32 key = 0;
volatile const __be32 local_ip = 0;
volatile const __be32 remote_ip = 0;
volatile const __u32 underlay_ifindex = 0;
// How long (ns) a CPU reuses the outer Ethernet header it prepared from a
// route lookup before it looks the route up again: route and neighbour
// changes on the underlay apply within this time. 0 looks the route up for
// every frame (the earlier path, kept for comparison).
volatile const __u64 route_ttl_ns = 0;
// 1 when the kernel's adjust_room takes ADJ_ROOM_DECAP_L3_* (Linux 6.3 and
// later), 0 before (Debian 12's 6.1): the loader asks the kernel.
volatile const __u32 decap_l3 = 0;

// Counter slots of encap_stats.
enum {
	ENCAP_OK = 0,       // frames encapsulated and sent
	ENCAP_NO_ROUTE = 1, // no route or no neighbour to the remote machine
	ENCAP_ERROR = 2,    // a helper failed (FWD_DISABLED from the route lookup
			    // included), or a frame that cannot be carried
	ENCAP_MAX,
};

// Counter slots of decap_stats.
enum {
	DECAP_OK = 0,           // packets decapsulated and handed to their port
	DECAP_UNKNOWN_KEY = 1,  // EGRE packet whose key no tunnel has
	DECAP_WRONG_SOURCE = 2, // known key, but not from that tunnel's remote
	DECAP_ERROR = 3,        // a helper failed
	DECAP_VXLAN_REFUSED = 4, // VXLAN packet for one of our VNIs, not from
				 // a machine of that tunnel (or cut too short
				 // to tell)
	DECAP_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ENCAP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} encap_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DECAP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} decap_stats SEC(".maps");

// The outer Ethernet header of this tunnel (one program, so one map, per
// tunnel port), prepared from a route lookup and reused for route_ttl_ns.
// Per CPU: each CPU refreshes its own copy, and no frame ever reads one
// half written by another CPU.
struct route_tmpl {
	__u8 smac[ETH_ALEN];
	__u8 dmac[ETH_ALEN];
	__u32 ifindex;
	__u64 stamp; // bpf_ktime_get_ns() of the lookup; 0: none yet
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct route_tmpl);
} encap_route SEC(".maps");

struct tunnel_key {
	__be32 key;       // GRE key, network byte order
	__be32 remote_ip; // outer source address, network byte order
};

// tunnel_value.flags
#define TUNNEL_INTO_PEER 1 // IP frames go straight into the port's veth peer

struct tunnel_value {
	__u32 ifindex; // port whose egress gets the inner frame
	__u32 flags;
};

// (key, remote) -> port. The one lookup of the decapsulation fast path.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct tunnel_key);
	__type(value, struct tunnel_value);
} tunnels SEC(".maps");

// key -> number of tunnels with that key. Read only on the drop path, to
// tell an unknown key from a known key arriving from the wrong machine.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __be32);
	__type(value, __u32);
} keys SEC(".maps");

// UDP ports of trellis's VXLAN devices: the vxlan tunnel kind's (IANA) and
// that of the tunnels to remote engines (internal/plan.EngineVXLANPort).
#define VXLAN_PORT 4789
#define ENGINE_VXLAN_PORT 4792

// (VNI word, remote) -> 1: the machines a VXLAN tunnel of this machine takes
// packets from. The VNI word is the second 32-bit word of the VXLAN header
// (VNI in the top 24 bits, network order) with its low, reserved byte
// replaced by 0 for VXLAN_PORT and 1 for ENGINE_VXLAN_PORT.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct tunnel_key);
	__type(value, __u32);
} vxlan_peers SEC(".maps");

// VNI word -> number of vxlan_peers entries with it: the VNIs that are ours.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __be32);
	__type(value, __u32);
} vxlan_vnis SEC(".maps");

static __always_inline void count(void *map, __u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(map, &slot);

	if (v)
		*v += 1; // per-CPU slot: no other writer
}

// Everything egre puts in front of the inner frame, plus room for the inner
// Ethernet header (with up to two VLAN tags) that is rebuilt behind it.
struct egre_hdr {
	// outer Ethernet
	__u8 h_dest[ETH_ALEN];
	__u8 h_source[ETH_ALEN];
	__be16 h_proto;
	// outer IPv4
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__be32 saddr;
	__be32 daddr;
	// GRE with key
	__be16 gre_flags;
	__be16 gre_proto;
	__be32 gre_key;
	// inner Ethernet: addresses, 0..2 VLAN tags, type
	__u8 in_dest[ETH_ALEN];
	__u8 in_source[ETH_ALEN];
	__be16 in_rest[2 * MAX_VLAN_TAGS + 1];
} __attribute__((packed));

struct vlan_tag {
	__be16 tpid;
	__be16 tci;
};

// The outer IPv4 header checksum, computed from the fields rather than from
// memory: only tot_len varies from packet to packet.
static __always_inline __u16 outer_ip_csum(__u16 tot_len)
{
	__u32 sa = bpf_ntohl(local_ip), da = bpf_ntohl(remote_ip);
	__u32 s = 0x4500 + tot_len + IP_DF + ((EGRE_TTL << 8) | IPPROTO_GRE);

	s += (sa >> 16) + (sa & 0xffff) + (da >> 16) + (da & 0xffff);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return bpf_htons(~s & 0xffff);
}

// How the frame leaves: the route's MAC addresses (neigh = 0), or neighbour
// resolution by the kernel (neigh = 1, IP frames only).
struct egress {
	__u8 smac[ETH_ALEN];
	__u8 dmac[ETH_ALEN];
	__u32 ifindex;
	int neigh;
};

// encap_tags encapsulates the frame whose VLAN tags (ntags, a constant
// after inlining) have already been taken off the skb.
static __always_inline int encap_tags(struct __sk_buff *skb, const int ntags,
				      struct vlan_tag *tags, struct egress *out)
{
	const __u32 room = EGRE_HLEN + VLAN_HLEN * ntags;
	const __u32 hlen = EGRE_HLEN + ETH_HLEN + VLAN_HLEN * ntags;
	struct egre_hdr h = {};
	__u64 csum_flags = 0;
	struct ethhdr eth;
	__u32 len;
	int i;

	if (bpf_skb_load_bytes(skb, 0, &eth, ETH_HLEN) < 0)
		goto error;

	// IP frames: open the room between the Ethernet and the IP header and
	// tell the kernel what was added, so that a GSO super-packet (TCP
	// segmentation offload) is later cut into GRE packets each with its own
	// outer headers. FIXED_GSO keeps the segment size: the inner MTU is
	// already the underlay MTU minus 42.
	//
	// adjust_room refuses anything that is not IPv4 or IPv6 (ARP, non-IP
	// ethertypes) and packets that are already encapsulated: those get
	// their room in front of the frame with change_head instead, which
	// needs no knowledge of the contents (and cannot be used for GSO
	// packets, whose segmentation would not know about the new headers).
	int adjusted = 0;
	if (skb->protocol == bpf_htons(ETH_P_IP) ||
	    skb->protocol == bpf_htons(ETH_P_IPV6)) {
		__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO |
			      BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 |
			      BPF_F_ADJ_ROOM_ENCAP_L4_GRE |
			      BPF_F_ADJ_ROOM_ENCAP_L2_ETH |
			      BPF_F_ADJ_ROOM_ENCAP_L2(ETH_HLEN + VLAN_HLEN * ntags);

		adjusted = bpf_skb_adjust_room(skb, room, BPF_ADJ_ROOM_MAC, flags) == 0;
	}
	if (!adjusted) {
		if (skb->gso_size)
			goto error;
		// Neighbour resolution by the kernel (redirect_neigh) needs an
		// IPv4 skb->protocol, which only adjust_room gives.
		if (out->neigh) {
			count(&encap_stats, ENCAP_NO_ROUTE);
			return TC_ACT_SHOT;
		}
		if (bpf_skb_change_head(skb, room, 0) < 0)
			goto error;
	}

	// adjust_room: [Ethernet][room, zeroed][IP ...]
	// change_head: [room, zeroed][Ethernet][payload ...]
	// Either way the first hlen bytes are rewritten whole: outer headers,
	// then the inner Ethernet header (with its VLAN tags put back in).
	__builtin_memcpy(h.h_dest, out->dmac, ETH_ALEN);
	__builtin_memcpy(h.h_source, out->smac, ETH_ALEN);
	h.h_proto = bpf_htons(ETH_P_IP);

	len = skb->len - ETH_HLEN;
	// A GSO super-packet may exceed 64 KiB (BIG TCP); its outer length is
	// rewritten for every segment anyway. 0 is what the kernel itself uses.
	if (len > 0xffff)
		len = 0;
	h.ver_ihl = 0x45;
	h.tot_len = bpf_htons(len);
	h.frag_off = bpf_htons(IP_DF);
	h.ttl = EGRE_TTL;
	h.protocol = IPPROTO_GRE;
	h.check = outer_ip_csum(len);
	h.saddr = local_ip;
	h.daddr = remote_ip;

	h.gre_flags = bpf_htons(GRE_KEY_PRESENT);
	h.gre_proto = bpf_htons(ETH_P_TEB);
	h.gre_key = key;

	__builtin_memcpy(h.in_dest, eth.h_dest, ETH_ALEN);
	__builtin_memcpy(h.in_source, eth.h_source, ETH_ALEN);
	for (i = 0; i < ntags; i++) {
		h.in_rest[2 * i] = tags[i].tpid;
		h.in_rest[2 * i + 1] = tags[i].tci;
	}
	h.in_rest[2 * ntags] = eth.h_proto;

	// After adjust_room the bytes behind the outer Ethernet header are in
	// the range covered by a CHECKSUM_COMPLETE skb->csum; after change_head
	// they are all part of the MAC header, which is not.
	if (adjusted)
		csum_flags = BPF_F_RECOMPUTE_CSUM;
	if (bpf_skb_store_bytes(skb, 0, &h, ETH_HLEN, 0) < 0)
		goto error;
	if (bpf_skb_store_bytes(skb, ETH_HLEN, (__u8 *)&h + ETH_HLEN,
				hlen - ETH_HLEN, csum_flags) < 0)
		goto error;

	count(&encap_stats, ENCAP_OK);
	if (out->neigh)
		// The kernel resolves the next hop (queueing the packet
		// meanwhile) and writes both MAC addresses.
		return bpf_redirect_neigh(out->ifindex, NULL, 0, 0);
	return bpf_redirect(out->ifindex, 0);

error:
	count(&encap_stats, ENCAP_ERROR);
	return TC_ACT_SHOT;
}

// route fills out with how frames leave for the remote machine: from this
// CPU's template while it is younger than route_ttl_ns, else from a route
// lookup, which refreshes the template. It returns TC_ACT_OK, or the verdict
// for a frame that cannot leave (counted).
static __always_inline int route(struct __sk_buff *skb, struct egress *out)
{
	struct bpf_fib_lookup fib = {};
	struct route_tmpl *t = NULL;
	__u32 zero = 0;
	__u64 now = 0;
	int rc;

	if (route_ttl_ns) {
		t = bpf_map_lookup_elem(&encap_route, &zero);
		now = bpf_ktime_get_ns();
		if (t && t->stamp && now - t->stamp < route_ttl_ns) {
			__builtin_memcpy(out->smac, t->smac, ETH_ALEN);
			__builtin_memcpy(out->dmac, t->dmac, ETH_ALEN);
			out->ifindex = t->ifindex;
			return TC_ACT_OK;
		}
	}

	// The lookup is made as if forwarding a packet received on this port
	// (flags 0, ifindex = the port), not as an output lookup on the
	// underlay (BPF_FIB_LOOKUP_OUTPUT, ifindex = underlay): the helper
	// answers FWD_DISABLED unless the device it is given has IPv4
	// forwarding enabled, whatever the flags, and enabling it on the
	// underlay would make the host a router for what arrives there. The
	// loader enables it on the port instead, whose every frame this
	// program consumes.
	fib.family = AF_INET;
	fib.l4_protocol = IPPROTO_GRE;
	fib.ipv4_src = local_ip;
	fib.ipv4_dst = remote_ip;
	fib.ifindex = skb->ifindex;
	rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	// Tunnel packets leave through the underlay and nowhere else (say, into
	// another node's port through a misconfigured route).
	if ((rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH) &&
	    fib.ifindex != underlay_ifindex)
		rc = BPF_FIB_LKUP_RET_NOT_FWDED;
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
		__builtin_memcpy(out->smac, fib.smac, ETH_ALEN);
		__builtin_memcpy(out->dmac, fib.dmac, ETH_ALEN);
		out->ifindex = fib.ifindex;
		if (t) {
			__builtin_memcpy(t->smac, fib.smac, ETH_ALEN);
			__builtin_memcpy(t->dmac, fib.dmac, ETH_ALEN);
			t->ifindex = fib.ifindex;
			t->stamp = now ? now : 1;
		}
		return TC_ACT_OK;
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		// Only IP frames can wait for the neighbour (redirect_neigh);
		// encap_tags drops the others. Not kept: the next frame asks
		// again, until the neighbour is known.
		out->ifindex = fib.ifindex;
		out->neigh = 1;
		return TC_ACT_OK;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		count(&encap_stats, ENCAP_NO_ROUTE);
		return TC_ACT_SHOT;
	default:
		count(&encap_stats, ENCAP_ERROR);
		return TC_ACT_SHOT;
	}
}

SEC("tc")
int egre_encap(struct __sk_buff *skb)
{
	struct vlan_tag tags[MAX_VLAN_TAGS] = {};
	struct egress out = {};
	int ntags = 0, rc;

	// Route to the remote machine first: nothing is changed yet if there
	// is none.
	rc = route(skb, &out);
	if (rc != TC_ACT_OK)
		return rc;

	// VLAN tags arrive out of band (the receive path moves the outer tag
	// into skb metadata, and a veth transmits it that way too): take them
	// off so that the outer frame carries none, and put them back into
	// the inner frame's data.
	if (skb->vlan_present) {
		tags[0].tpid = (__be16)skb->vlan_proto;
		tags[0].tci = bpf_htons((__u16)skb->vlan_tci);
		if (bpf_skb_vlan_pop(skb) < 0)
			goto error;
		ntags = 1;
		// A second, in-band tag is moved out of band by the pop.
		if (skb->vlan_present) {
			tags[1].tpid = (__be16)skb->vlan_proto;
			tags[1].tci = bpf_htons((__u16)skb->vlan_tci);
			if (bpf_skb_vlan_pop(skb) < 0)
				goto error;
			ntags = 2;
			if (skb->vlan_present)
				goto error; // more than two tags
		}
	}

	switch (ntags) {
	case 0:
		return encap_tags(skb, 0, tags, &out);
	case 1:
		return encap_tags(skb, 1, tags, &out);
	default:
		return encap_tags(skb, 2, tags, &out);
	}

error:
	count(&encap_stats, ENCAP_ERROR);
	return TC_ACT_SHOT;
}

// The headers egre_decap looks at, as they arrive.
struct egre_rx {
	struct ethhdr eth;
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__be32 saddr;
	__be32 daddr;
	__be16 gre_flags;
	__be16 gre_proto;
	__be32 gre_key;
	struct ethhdr inner;
} __attribute__((packed));

static __always_inline int is_vlan(__be16 proto)
{
	return proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
}

// Smallest inner frame bpf_skb_adjust_room can leave behind: it refuses to
// shrink a packet below 20 bytes past the (outer) Ethernet header.
#define MIN_INNER_LEN (ETH_HLEN + 20)

// decap_tags replaces the outer headers of an EGRE packet with eth (the
// inner Ethernet header without its ntags VLAN tags, ntags a constant after
// inlining), puts the tags out of band and sends the frame to its port.
static __always_inline int decap_tags(struct __sk_buff *skb, const int ntags,
				      struct egre_rx *h, struct ethhdr *eth,
				      struct vlan_tag *tags,
				      const struct tunnel_value *t)
{
	const __u32 cut = EGRE_HLEN + VLAN_HLEN * ntags;
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO;
	__u32 more = 0;
	int i;

	if (!skb->gso_size) {
		__u32 frame = ETH_HLEN + bpf_ntohs(h->tot_len);

		// Truncated: the IP stack drops it.
		if (frame < sizeof(*h) || frame > skb->len)
			return TC_ACT_UNSPEC;
		// Ethernet padding of a short outer frame is not part of the
		// inner frame.
		if (frame < skb->len && bpf_skb_change_tail(skb, frame, 0) < 0)
			goto error;
		// Pad a very short inner frame to the Ethernet minimum, so that
		// adjust_room accepts to shrink it.
		if (frame - cut < MIN_INNER_LEN &&
		    bpf_skb_change_tail(skb, cut + ETH_ZLEN, 0) < 0)
			goto error;
	}

	// The inner Ethernet header takes the place of the outer one, then the
	// bytes behind it (outer IPv4, GRE, the inner header's old place and
	// its tags) go. FIXED_GSO: the segment size of a GSO packet stays what
	// it is (the sender's MSS).
	if (bpf_skb_store_bytes(skb, 0, eth, ETH_HLEN, 0) < 0)
		goto error;
	// skb->protocol must become the inner frame's L3 protocol: IPv6 frames
	// go into nodes, and their GSO packets are cut by it. Since 6.3
	// adjust_room sets it when told. Before, an IPv6 frame's is made IPv6
	// by bpf_skb_change_proto, which turns the outer IPv4 header's room
	// into an IPv6 header's (20 bytes more, cut with the rest); an IPv4
	// frame's already is. It stays IPv4 for frames that are not IP, which
	// cannot be GSO packets; the receiving veth derives the real one.
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		if (decap_l3)
			flags |= ADJ_ROOM_DECAP_L3_IPV6;
		else if (bpf_skb_change_proto(skb, bpf_htons(ETH_P_IPV6), 0) < 0)
			goto error;
		else
			more = IP6_MORE;
	} else if (decap_l3 && eth->h_proto == bpf_htons(ETH_P_IP)) {
		flags |= ADJ_ROOM_DECAP_L3_IPV4;
	}
	if (bpf_skb_adjust_room(skb, -(int)(cut + more), BPF_ADJ_ROOM_MAC, flags) < 0)
		goto error;
	// Innermost first: pushing a tag moves the one already out of band
	// into the frame.
	for (i = ntags - 1; i >= 0; i--)
		if (bpf_skb_vlan_push(skb, tags[i].tpid, bpf_ntohs(tags[i].tci)) < 0)
			goto error;

	count(&decap_stats, DECAP_OK);
	// An untagged IP frame for a node's port goes straight into the node
	// (the ingress of the port's veth peer), as the shortbridge does: one
	// pass through a receive backlog fewer. The link's rate cap is kept by
	// the sending machine. Other frames need the receiving veth to derive
	// skb->protocol from the inner frame (adjust_room left it IPv4, and a
	// program cannot write it), so they go out of the port's egress.
	if ((t->flags & TUNNEL_INTO_PEER) && ntags == 0 &&
	    (eth->h_proto == bpf_htons(ETH_P_IP) ||
	     eth->h_proto == bpf_htons(ETH_P_IPV6)))
		return bpf_redirect_peer(t->ifindex, 0);
	return bpf_redirect(t->ifindex, 0);

error:
	count(&decap_stats, DECAP_ERROR);
	return TC_ACT_SHOT;
}

struct vxlan_rx {
	__be16 sport;
	__be16 dport;
	__be16 len;
	__be16 check;
	__be32 flags; // VXLAN: flags, reserved
	__be32 vni;   // VXLAN: VNI, reserved
} __attribute__((packed));

// vxlan_check vets an IPv4 packet (any destination address, any link-layer
// type: the kernel's VXLAN socket takes them all) before the IP stack sees
// it. A UDP packet to one of trellis's VXLAN ports whose VNI is one of this
// machine's tunnels goes on only if its source is a machine of that tunnel;
// any other passes untouched. Fragments: the first one carries the UDP and
// VXLAN headers and is checked like a whole packet (one too short to show
// them is dropped: no honest sender cuts there); the others carry no header
// and pass, as the kernel's reassembly drops overlapping fragments, so they
// cannot complete a packet whose first fragment was dropped.
static __always_inline int vxlan_check(struct __sk_buff *skb)
{
	struct {
		__u8 ver_ihl;
		__u8 tos;
		__be16 tot_len;
		__be16 id;
		__be16 frag_off;
		__u8 ttl;
		__u8 protocol;
		__u16 check;
		__be32 saddr;
	} __attribute__((packed)) ip;
	struct vxlan_rx u;
	struct tunnel_key k;
	__u32 hl;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0 ||
	    ip.protocol != IPPROTO_UDP || (ip.frag_off & bpf_htons(IP_OFFSET)))
		return TC_ACT_UNSPEC;
	hl = (ip.ver_ihl & 0xf) * 4;
	if (hl < 20)
		return TC_ACT_UNSPEC; // not IPv4 the stack accepts
	if (bpf_skb_load_bytes(skb, ETH_HLEN + hl, &u, 4) < 0)
		goto refuse; // a first fragment too short to show its ports
	if (u.dport != bpf_htons(VXLAN_PORT) && u.dport != bpf_htons(ENGINE_VXLAN_PORT))
		return TC_ACT_UNSPEC;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + hl, &u, sizeof(u)) < 0)
		goto refuse;
	k.key = (u.vni & bpf_htonl(0xffffff00)) |
		bpf_htonl(u.dport == bpf_htons(ENGINE_VXLAN_PORT));
	k.remote_ip = ip.saddr;
	if (bpf_map_lookup_elem(&vxlan_peers, &k) ||
	    !bpf_map_lookup_elem(&vxlan_vnis, &k.key))
		return TC_ACT_UNSPEC;
refuse:
	count(&decap_stats, DECAP_VXLAN_REFUSED);
	return TC_ACT_SHOT;
}

SEC("tc")
int egre_decap(struct __sk_buff *skb)
{
	struct tunnel_value *t;
	struct tunnel_key tk;
	struct egre_rx h;
	__u16 *w;
	__u32 sum;
	int i;

	// Anything that is not an EGRE packet for this machine goes on
	// untouched. TC_ACT_UNSPEC rather than TC_ACT_OK: the frame continues
	// exactly as with TC_ACT_OK, and other tc filters on this (shared,
	// host) device still get to see it.
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_UNSPEC;
	// Too short for EGRE, or UDP: what vxlan_check does not stop passes.
	if (skb->len < sizeof(h) || bpf_skb_load_bytes(skb, 0, &h, sizeof(h)) < 0 ||
	    h.protocol == IPPROTO_UDP)
		return vxlan_check(skb);
	if (skb->pkt_type != PACKET_HOST)
		return TC_ACT_UNSPEC;
	if (h.ver_ihl != 0x45 || h.protocol != IPPROTO_GRE ||
	    (h.frag_off & bpf_htons(IP_MF_OFFSET)) || h.daddr != local_ip)
		return TC_ACT_UNSPEC;
	if (h.gre_flags != bpf_htons(GRE_KEY_PRESENT) ||
	    h.gre_proto != bpf_htons(ETH_P_TEB))
		return TC_ACT_UNSPEC;
	// A damaged header is the IP stack's to drop (and count).
	w = (__u16 *)((__u8 *)&h + ETH_HLEN);
	sum = 0;
#pragma clang loop unroll(full)
	for (i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	if (sum != 0xffff)
		return TC_ACT_UNSPEC;

	tk.key = h.gre_key;
	tk.remote_ip = h.saddr;
	t = bpf_map_lookup_elem(&tunnels, &tk);
	if (!t) {
		if (bpf_map_lookup_elem(&keys, &tk.key))
			count(&decap_stats, DECAP_WRONG_SOURCE);
		else
			count(&decap_stats, DECAP_UNKNOWN_KEY);
		return TC_ACT_SHOT;
	}

	// VLAN tags of the inner frame go back out of band, where the kernel
	// keeps the (outer) tag of every frame it receives: the receiving side
	// then sees what a NIC would have given it, and skb->protocol (which
	// segmentation of a GSO packet relies on) can be the real L3 protocol.
	struct ethhdr eth = h.inner;
	struct vlan_tag tags[MAX_VLAN_TAGS] = {};
	__be16 rest[2 * MAX_VLAN_TAGS] = {};
	int ntags = 0;

	if (is_vlan(eth.h_proto) &&
	    bpf_skb_load_bytes(skb, sizeof(h), rest, sizeof(rest)) == 0) {
		tags[0].tpid = eth.h_proto;
		tags[0].tci = rest[0];
		eth.h_proto = rest[1];
		ntags = 1;
		if (is_vlan(eth.h_proto)) {
			tags[1].tpid = eth.h_proto;
			tags[1].tci = rest[2];
			eth.h_proto = rest[3];
			ntags = 2;
		}
	}

	switch (ntags) {
	case 0:
		return decap_tags(skb, 0, &h, &eth, tags, t);
	case 1:
		return decap_tags(skb, 1, &h, &eth, tags, t);
	default:
		return decap_tags(skb, 2, &h, &eth, tags, t);
	}
}

char LICENSE[] SEC("license") = "GPL";
