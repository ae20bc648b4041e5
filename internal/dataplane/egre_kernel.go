package dataplane

import (
	"encoding/binary"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// decapL3 tells whether the kernel's bpf_skb_adjust_room takes BPF_F_ADJ_ROOM_DECAP_L3_IPV4/_IPV6
// (Linux 6.3), with which the decapsulation program makes a decapsulated IPv6 frame's
// skb->protocol IPv6. Earlier kernels refuse every call with them (EINVAL), which dropped every
// IP frame there: the program, loaded with decap_l3 0, then leaves them out and makes an IPv6
// frame's protocol with bpf_skb_change_proto instead (bpf/egre.c). A variable so that a test can
// take the earlier kernels' path on a later one.
var decapL3 = sync.OnceValue(haveDecapL3)

// haveDecapL3 asks the kernel, not its version (a distribution kernel may have the flags
// backported): it runs a program that only calls adjust_room with the flag, taking an EGRE
// packet's outer IPv4 and GRE headers off, once on a test frame (BPF_PROG_TEST_RUN). Any
// failure to ask counts as "no": that path works on every kernel.
func haveDecapL3() bool {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.SchedCLS,
		License: "GPL",
		Instructions: asm.Instructions{
			// R1 is the skb.
			asm.Mov.Imm(asm.R2, -(EGREOverhead - 14)), // outer IPv4 and GRE
			asm.Mov.Imm(asm.R3, 1),                    // BPF_ADJ_ROOM_MAC
			asm.LoadImm(asm.R4, 1<<7, asm.DWord),      // BPF_F_ADJ_ROOM_DECAP_L3_IPV4
			asm.FnSkbAdjustRoom.Call(),
			asm.Return(),
		},
	})
	if err != nil {
		return false
	}
	defer prog.Close()
	ret, err := prog.Run(&ebpf.RunOptions{Data: decapProbeFrame()})
	return err == nil && ret == 0
}

// decapProbeFrame is an EGRE packet (outer Ethernet, IPv4, GRE with key) carrying an Ethernet
// frame with an IPv4 header and 8 bytes of payload.
func decapProbeFrame() []byte {
	inner := make([]byte, 14+20+8)
	binary.BigEndian.PutUint16(inner[12:], 0x0800)
	inner[14] = 0x45
	binary.BigEndian.PutUint16(inner[14+2:], 20+8)
	f := make([]byte, EGREOverhead, EGREOverhead+len(inner))
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	f[14] = 0x45
	binary.BigEndian.PutUint16(f[14+2:], uint16(EGREOverhead-14+len(inner)))
	f[14+9] = 47                               // GRE
	binary.BigEndian.PutUint16(f[34:], 0x2000) // key present
	binary.BigEndian.PutUint16(f[36:], 0x6558) // transparent Ethernet bridging
	return append(f, inner...)
}
