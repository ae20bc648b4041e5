// SPDX-License-Identifier: GPL-2.0
//
// softirq: how long each CPU spends in each softirq vector, for the bench's
// CPU cost per forwarded frame.
//
// Two programs on the tracepoints irq:softirq_entry and irq:softirq_exit.
// Entry notes the time in a per-CPU slot; exit adds the time since then to
// the CPU's total for that vector (NET_RX = 3 is the one that forwards).
// Softirqs do not nest on one CPU (they run with bottom halves disabled), so
// one slot per CPU is enough. The programs run once per softirq, not once per
// frame: a NET_RX softirq serves up to hundreds of frames.
//
// The time is also added to a second counter when the softirq ran on top of
// the task the bench watches (the user-space relay): without
// IRQ_TIME_ACCOUNTING the kernel charges such softirq time to that task as
// well, and the bench must not count it twice.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NR_SOFTIRQS 10

// The tracepoints' record (see events/irq/softirq_entry/format in tracefs):
// 8 bytes of common fields, then the vector.
struct softirq_args {
	__u64 common;
	__u32 vec;
};

struct softirq_time {
	__u64 ns;      // time spent in this vector
	__u64 count;   // softirqs of this vector
	__u64 task_ns; // of ns, time spent while the watched task was current
};

// Per CPU: when the current softirq began (0: none running).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} entered SEC(".maps");

// Per CPU and vector: the totals.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SOFTIRQS);
	__type(key, __u32);
	__type(value, struct softirq_time);
} softirq_times SEC(".maps");

// Key 0: the thread group id of the watched task (0: none).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} watch SEC(".maps");

SEC("tracepoint/irq/softirq_entry")
int softirq_entry(struct softirq_args *ctx)
{
	__u32 zero = 0;
	__u64 *t = bpf_map_lookup_elem(&entered, &zero);

	if (t)
		*t = bpf_ktime_get_ns();
	return 0;
}

SEC("tracepoint/irq/softirq_exit")
int softirq_exit(struct softirq_args *ctx)
{
	__u32 zero = 0, vec = ctx->vec;
	__u64 now = bpf_ktime_get_ns();
	__u64 *t = bpf_map_lookup_elem(&entered, &zero);
	struct softirq_time *st;
	__u32 *tgid;
	__u64 d;

	if (!t || *t == 0 || *t > now)
		return 0; // attached in the middle of a softirq
	d = now - *t;
	*t = 0;
	st = bpf_map_lookup_elem(&softirq_times, &vec);
	if (!st)
		return 0;
	st->ns += d;
	st->count++;
	tgid = bpf_map_lookup_elem(&watch, &zero);
	if (tgid && *tgid && (bpf_get_current_pid_tgid() >> 32) == *tgid)
		st->task_ns += d;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
