package measure

import (
	"encoding/binary"
	"fmt"
	"net"
)

// Frame sizes count the Ethernet frame from destination MAC to the end of the payload, without
// the 4-byte FCS (which a veth never carries): a "64-byte frame" here is 14 bytes of Ethernet
// header, 20 of IPv4, 8 of UDP and 22 of payload.
const (
	MinFrame  = 60
	MaxFrame  = 1514
	HeaderLen = 14 + 20 + 8 // Ethernet, IPv4 and UDP headers
)

// FlowAddrs says where the generated frames go: MACs of the first hop, IPv4 addresses of the
// source and the final destination, and the UDP ports. Flow i uses source port SrcPort+i.
type FlowAddrs struct {
	SrcMAC, DstMAC net.HardwareAddr
	SrcIP, DstIP   net.IP
	SrcPort        uint16
	DstPort        uint16
}

// UDPFrames builds one frame per flow, of size bytes each.
func UDPFrames(a FlowAddrs, size, flows int) ([][]byte, error) {
	if size < MinFrame || size > MaxFrame {
		return nil, fmt.Errorf("frame size %d: must be between %d and %d bytes", size, MinFrame, MaxFrame)
	}
	if flows < 1 || flows > 65535-int(a.SrcPort) {
		return nil, fmt.Errorf("flows %d: must be between 1 and %d", flows, 65535-int(a.SrcPort))
	}
	out := make([][]byte, flows)
	for i := range out {
		f := make([]byte, size)
		copy(f[0:6], a.DstMAC)
		copy(f[6:12], a.SrcMAC)
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip := f[14:34]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
		binary.BigEndian.PutUint16(ip[4:], uint16(i))
		ip[8] = 64 // TTL
		ip[9] = 17 // UDP
		copy(ip[12:16], a.SrcIP.To4())
		copy(ip[16:20], a.DstIP.To4())
		binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
		udp := f[34:42]
		binary.BigEndian.PutUint16(udp[0:], a.SrcPort+uint16(i))
		binary.BigEndian.PutUint16(udp[2:], a.DstPort)
		binary.BigEndian.PutUint16(udp[4:], uint16(size-34))
		// UDP checksum 0: none, allowed over IPv4.
		for j := HeaderLen; j < size; j++ {
			f[j] = byte(j)
		}
		out[i] = f
	}
	return out, nil
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
