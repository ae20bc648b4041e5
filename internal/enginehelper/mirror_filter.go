package enginehelper

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// skfNetOff is SKF_NET_OFF of <linux/filter.h> (-0x100000), as a classic BPF load offset:
// offsets from it are relative to the network header.
const skfNetOff = 0xfff00000

// listenFrom listens on TCP address addr (IPv4) for connections from the address from only: a
// socket filter drops every packet of another source before TCP sees it, so a host on the
// underlay that is not the node's machine gets no answer at all (no SYN-ACK, no reset), as
// from a port nobody opened. The accepted connections keep the filter.
func listenFrom(ctx context.Context, addr string, from netip.Addr) (net.Listener, error) {
	if !from.Is4() {
		return nil, fmt.Errorf("%w: %v is not an IPv4 address", ErrConfig, from)
	}
	a4 := from.As4()
	prog, err := bpf.Assemble([]bpf.Instruction{
		// The IPv4 source address: 12 bytes into the network header.
		bpf.LoadAbsolute{Off: skfNetOff + 12, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: binary.BigEndian.Uint32(a4[:]), SkipTrue: 1},
		bpf.RetConstant{Val: 0},          // drop
		bpf.RetConstant{Val: 0xffffffff}, // keep the whole packet
	})
	if err != nil {
		return nil, err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
				&unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]})
		})
		if err == nil && serr != nil {
			err = fmt.Errorf("attaching the socket filter: %w", serr)
		}
		return err
	}}
	return lc.Listen(ctx, "tcp4", addr)
}
