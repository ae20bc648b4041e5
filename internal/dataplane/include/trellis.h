/* trellis.h: what a node's own forwarding program (docs/ebpf-nodes.md) gets from trellis.
 *
 * trellis compiles the program with `clang -O2 -g -target bpf` and this header on the include
 * path. The program is one function marked TRELLIS_PROGRAM; trellis runs it on every frame that
 * comes to one of the node's ports, before the node sees it. It returns one of:
 *
 *   trellis_send(skb, N)   the frame leaves through port N (to the node at the other end)
 *   TRELLIS_TO_NODE        the frame goes on to the node's own kernel (its daemons, its stack)
 *   TRELLIS_DROP           the frame is dropped
 *
 * Ports are numbered by the number their interface's name ends with (eth1: port 1).
 * trellis_in_port(skb) is the port the frame came to. Frames the node's kernel sends leave
 * through their port as they are, without the program.
 */
#ifndef TRELLIS_H
#define TRELLIS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>

#ifndef __BPF_HELPERS__ /* libbpf's bpf_helpers.h, if the program includes it first */
#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)BPF_FUNC_map_update_elem;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_delete_elem;
static long (*bpf_redirect)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect;
static long (*bpf_skb_store_bytes)(struct __sk_buff *skb, __u32 offset, const void *from, __u32 len, __u64 flags) = (void *)BPF_FUNC_skb_store_bytes;
static long (*bpf_l3_csum_replace)(struct __sk_buff *skb, __u32 offset, __u64 from, __u64 to, __u64 size) = (void *)BPF_FUNC_l3_csum_replace;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
#endif

/* Byte order of the frame's fields (network order) from and to the machine's. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define trellis_htons(x) __builtin_bswap16(x)
#define trellis_htonl(x) __builtin_bswap32(x)
#else
#define trellis_htons(x) (x)
#define trellis_htonl(x) (x)
#endif
#define trellis_ntohs(x) trellis_htons(x)
#define trellis_ntohl(x) trellis_htonl(x)

#define TRELLIS_PROGRAM SEC("tc")
#define TRELLIS_LICENSE char _license[] SEC("license") = "GPL"
#define TRELLIS_TO_NODE TC_ACT_OK
#define TRELLIS_DROP TC_ACT_SHOT
#define TRELLIS_MAX_PORTS 64

/* Filled by trellis, read-only to `trellis table`: port number -> the interface of the port in
 * the substrate, and back. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRELLIS_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} trellis_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TRELLIS_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} trellis_port_of SEC(".maps");

/* trellis_in_port returns the port the frame came to (0 if trellis does not know it). */
static __always_inline __u32 trellis_in_port(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	__u32 *port = bpf_map_lookup_elem(&trellis_port_of, &ifindex);
	return port ? *port : 0;
}

/* trellis_send sends the frame out of port N: return its value from the program. A port the
 * node does not have drops the frame. */
static __always_inline int trellis_send(struct __sk_buff *skb, __u32 port)
{
	__u32 *ifindex = bpf_map_lookup_elem(&trellis_ports, &port);
	(void)skb;
	if (!ifindex || !*ifindex)
		return TRELLIS_DROP;
	return bpf_redirect(*ifindex, BPF_F_INGRESS);
}

#endif
