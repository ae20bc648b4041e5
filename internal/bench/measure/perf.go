package measure

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"golang.org/x/sys/unix"
)

// Where the time goes: `perf record -a -g` while the generator offers a path a rate, then the
// kernel symbols of the forwarding CPU's samples, by share and in nanoseconds per frame
// delivered, and the same grouped by what the code does (profileGroups).

// ProfileFreq is perf's sampling frequency, per CPU.
const ProfileFreq = 4999

// Profiler runs perf over trials.
type Profiler struct {
	Perf   string // the perf binary
	Dir    string // where perf writes its data (removed after each profile)
	GenCPU int    // where perf itself runs (-1: anywhere)
	FwdCPU int    // whose samples are read
}

// Profile runs perf record over all CPUs while t offers rate for dur, and reads back the
// forwarding CPU's samples. name names the profile (the setup).
func (p *Profiler) Profile(ctx context.Context, name string, t *Traffic, rate float64, dur time.Duration) (*result.ProfileResult, error) {
	data := filepath.Join(p.Dir, "perf-"+name+".data")
	defer os.Remove(data)
	ctl, err := newPerfControl(p.Dir, name)
	if err != nil {
		return nil, err
	}
	defer ctl.close()
	var stderr bytes.Buffer
	// Events start disabled (-D -1) and are enabled through the control FIFO once perf has
	// read the machine's processes (which takes seconds with thousands of nodes): the trial
	// starts when perf acknowledges, so that none of it goes unrecorded.
	rec := exec.Command(p.Perf, "record", "-a", "-g", "-F", strconv.Itoa(ProfileFreq), "-o", data,
		"-D", "-1", "--control", "fifo:"+ctl.ctlPath+","+ctl.ackPath)
	rec.Stderr = &stderr
	// Ctrl-C goes to the bench, which stops perf; if the bench is killed, perf goes with it.
	rec.SysProcAttr = &unix.SysProcAttr{Setpgid: true, Pdeathsig: unix.SIGKILL}
	if err := rec.Start(); err != nil {
		return nil, err
	}
	if p.GenCPU >= 0 { // keep perf off the forwarding CPU
		var set unix.CPUSet
		set.Set(p.GenCPU)
		unix.SchedSetaffinity(rec.Process.Pid, &set)
	}
	if err := ctl.enable(ctx, 2*time.Minute); err != nil {
		rec.Process.Signal(unix.SIGINT)
		rec.Wait()
		return nil, fmt.Errorf("perf record: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	tr, err := t.Trial(ctx, rate, dur)
	rec.Process.Signal(unix.SIGINT)
	werr := rec.Wait()
	if err != nil {
		return nil, err
	}
	var exit *exec.ExitError
	if errors.As(werr, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
			werr = nil // perf ends itself with the signal it was stopped by
		}
	}
	if werr != nil {
		return nil, fmt.Errorf("perf record: %v: %s", werr, strings.TrimSpace(stderr.String()))
	}
	rep := exec.Command(p.Perf, "report", "-i", data, "--stdio", "--no-children", "--sort", "sym", "-g", "none",
		"--cpu", strconv.Itoa(p.FwdCPU), "-n", "--percent-limit", "0")
	var rstderr bytes.Buffer
	rep.Stderr = &rstderr
	text, err := rep.Output()
	if err != nil {
		return nil, fmt.Errorf("perf report: %v: %s", err, strings.TrimSpace(rstderr.String()))
	}
	res := &result.ProfileResult{Setup: name, RatePPS: rate, Frames: float64(tr.Frames), Freq: ProfileFreq}
	syms := parsePerfReport(text)
	res.Symbols, res.Groups, res.Samples = profileRows(syms, res.Frames, ProfileFreq)
	if res.Samples == 0 {
		return nil, errors.New("no samples on the forwarding CPU")
	}
	return res, nil
}

// perfSym is one line of `perf report --sort sym -n`: samples and symbol, [k] for the kernel.
type perfSym struct {
	name    string
	kernel  bool
	samples int
}

// parsePerfReport reads the lines of `perf report --stdio --sort sym -n -g none`:
//
//	12.34%   1234  [k] __netif_receive_skb_core
func parsePerfReport(text []byte) []perfSym {
	var out []perfSym
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasSuffix(f[0], "%") || !strings.HasPrefix(f[2], "[") {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		out = append(out, perfSym{name: strings.Join(f[3:], " "), kernel: f[2] == "[k]", samples: n})
	}
	return out
}

// profileTop is how many symbols a profile keeps.
const profileTop = 15

// profileRows turns symbols into the top rows and the groups, as shares of the busy samples
// (idle left out) and nanoseconds per frame.
func profileRows(syms []perfSym, frames float64, freq int) (top, groups []result.ProfileRow, busy int) {
	bySym := map[string]int{}
	byGroup := map[string]int{}
	for _, s := range syms {
		g := profileGroup(s)
		if g == groupIdle {
			continue
		}
		busy += s.samples
		name := s.name
		if !s.kernel {
			name = "(user space) " + name
		}
		bySym[name] += s.samples
		byGroup[g] += s.samples
	}
	row := func(name string, n int) result.ProfileRow {
		p := result.ProfileRow{Name: name, Percent: 100 * float64(n) / float64(max(busy, 1))}
		if frames > 0 {
			p.NSPerFrame = float64(n) * 1e9 / float64(freq) / frames
		}
		return p
	}
	for name, n := range bySym {
		top = append(top, row(name, n))
	}
	for name, n := range byGroup {
		groups = append(groups, row(name, n))
	}
	order := func(rows []result.ProfileRow) {
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].Percent != rows[j].Percent {
				return rows[i].Percent > rows[j].Percent
			}
			return rows[i].Name < rows[j].Name
		})
	}
	order(top)
	order(groups)
	return top[:min(profileTop, len(top))], groups, busy
}

const groupIdle = "idle"

// profileGroups sorts kernel symbols by what the code does, first match wins: a prefix, or
// "=name" for exactly that symbol.
var profileGroups = []struct {
	group    string
	patterns []string
}{
	{groupIdle, []string{"=default_idle", "=pv_native_safe_halt", "=native_safe_halt", "=poll_idle", "cpuidle_", "=do_idle", "=default_idle_call", "acpi_idle", "intel_idle", "mwait_idle", "=arch_cpu_idle"}},
	{"bridge netfilter (br_nf_*)", []string{"br_nf_", "=setup_pre_routing", "nf_bridge_", "skb_ext_", "__skb_ext_", "=brnf_"}},
	{"Linux bridge", []string{"br_", "__br_", "nbp_", "=fdb_find_rcu", "=maybe_deliver", "=deliver_clone", "fdb_"}},
	{"eBPF programs, tc, redirect", []string{"bpf_prog_", "bpf_", "tcf_", "__tcf_", "tc_run", "=sch_handle_ingress", "=sch_handle_egress", "cls_bpf", "=skb_do_redirect", "__bpf_", "=dev_get_by_index_rcu", "=lookup_nulls_elem_raw", "htab_", "=skb_ensure_writable"}},
	{"VXLAN and UDP tunnels", []string{"vxlan_", "udp_tunnel", "udp", "__udp", "gro_cell", "iptunnel_", "ip_tunnel_"}},
	{"veth and namespace crossing", []string{"veth_", "=skb_scrub_packet", "__dev_forward_skb", "=dev_forward_skb", "=is_skb_forwardable", "=map_id_range_down"}},
	{"IPv4 and routing", []string{"ip_", "__ip_", "fib_", "inet_", "neigh_", "___neigh_create", "arp_", "dst_", "rt_", "ipv4_", "ipv6_", "raw_local_deliver", "icmp_", "=siphash_3u32", "ip4_"}},
	{"netfilter", []string{"nf_", "ipt_", "nft_"}},
	{"receive core (backlog, RPS, softirq)", []string{"__netif_receive_skb", "netif_receive_skb", "netif_rx", "__netif_rx", "=enqueue_to_backlog", "=process_backlog", "=net_rx_action", "__napi_", "napi_", "=get_rps_cpu", "rps_", "=__do_softirq", "=handle_softirqs", "=do_softirq", "=__local_bh_enable_ip", "=irq_exit_rcu", "=eth_type_trans", "=skb_defer_rx_timestamp", "gro_", "dev_gro_", "=inet_gro_receive", "=skb_push", "=skb_pull", "=__skb_pull", "=skb_pull_rcsum", "smp_call_function", "=sysvec_call_function_single", "=__sysvec_call_function_single", "flush_smp_call_function", "__flush_smp_call_function", "=generic_smp_call_function_single_interrupt", "=__smp_call_single_queue", "=netif_skb_features"}},
	{"transmit core", []string{"dev_queue_xmit", "__dev_queue_xmit", "=dev_hard_start_xmit", "validate_xmit", "=netdev_core_pick_tx", "=sch_direct_xmit", "qdisc_", "__qdisc_", "=dev_qdisc_enqueue", "=skb_network_protocol", "=passthru_features_check", "=skb_csum_hwoffload_help", "dev_xmit_", "=skb_clone_tx_timestamp"}},
	{"skb memory", []string{"kmem_cache_", "kfree", "__kfree_skb", "skb_release", "consume_skb", "=__consume_stateless_skb", "=sk_skb_reason_drop", "__alloc_skb", "__build_skb", "build_skb", "skb_clone", "=__skb_clone", "=__copy_skb_header", "skb_free", "=skb_attempt_defer_free", "=__slab_free", "___slab_alloc", "__kmalloc", "kmalloc", "=sock_wfree", "=sock_def_write_space", "=skb_orphan", "page_", "__page_", "__free_", "free_", "=pskb_expand_head", "slab_", "memcg_", "__memcg_", "obj_cgroup_", "=refill_obj_stock", "=mod_objcg_state", "=put_cpu_partial", "=mod_node_page_state", "=__mod_node_page_state", "__put_partials"}},
	{"copies (memcpy, memmove)", []string{"__pi_memcpy", "=memcpy", "=__memcpy", "memcpy_", "=__memmove", "=memmove", "__pi_memset", "=memset", "=__memset", "=memcmp", "=rep_movs_alternative"}},
	{"locks, RCU, timers, scheduler", []string{"_raw_spin_", "=native_queued_spin_lock_slowpath", "queued_", "ktime_get", "=read_tsc", "kvm_clock", "=pvclock_clocksource_read", "__rcu_read_", "rcu_", "hrtimer", "irqentry_", "sysvec_", "__sysvec_", "asm_sysvec", "=schedule", "__schedule", "=finish_task_switch", "finish_task_switch", "=try_to_wake_up", "update_", "sched_", "pick_next_", "enqueue_", "dequeue_", "native_irq_return", "=native_write_msr", "=native_apic_msr_write", "x2apic_", "default_send_IPI", "__x2apic_", "kvm_", "tick_", "=run_timer_softirq", "__run_timers", "=call_timer_fn", "clockevents_", "=__list_del_entry_valid_or_report"}},
	{"system calls", []string{"entry_SYSCALL", "=do_syscall_64", "syscall_exit_", "__sys_", "__x64_sys_", "___sys_", "____sys_", "sock_", "__sock_", "packet_", "tpacket_", "skb_copy_datagram", "__skb_datagram_iter", "=simple_copy_to_iter", "csum_", "ep_", "do_epoll_wait", "_copy_", "copy_", "=__check_object_size", "=clear_bhb_loop", "__fdget", "=fput"}},
}

// profileGroup names what a symbol does; "other kernel" or "user space" when no pattern fits.
func profileGroup(s perfSym) string {
	if !s.kernel {
		return "user space"
	}
	for _, g := range profileGroups {
		for _, p := range g.patterns {
			if exact, ok := strings.CutPrefix(p, "="); ok {
				if s.name == exact {
					return g.group
				}
			} else if strings.HasPrefix(s.name, p) {
				return g.group
			}
		}
	}
	return "other kernel"
}
