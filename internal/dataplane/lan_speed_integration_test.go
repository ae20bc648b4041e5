//go:build integration

package dataplane

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLANProgramSpeed runs the LAN program on a frame to a learnt address with
// BPF_PROG_TEST_RUN, checks that it took the unicast path every time, and logs its time per
// frame next to the shortbridge's (the redirect itself is not made by a test run).
func TestLANProgramSpeed(t *testing.T) {
	spec, err := copyLANSpec()
	if err != nil {
		t.Fatal(err)
	}
	maps, err := lanMapsOf(nil, nil, spec, DefaultLANEntries)
	if err != nil {
		t.Fatal(err)
	}
	defer maps.close()
	if err := setLANMembers(maps, []LANMember{{Ifindex: 1, Peer: true}, {Ifindex: 2, Peer: true}}, DefaultLANAging); err != nil {
		t.Fatal(err)
	}
	prog, err := loadLANProgram(spec, maps, lanMemberPeer)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	frame := make([]byte, 64)
	copy(frame, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(frame[12:], 0x0800)
	var k uint64
	for i := 5; i >= 0; i-- {
		k = k<<8 | uint64(frame[i])
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		t.Fatal(err)
	}
	if err := maps.fdb.Put(k, &lanFdbEntry{Ifindex: 2, Flags: lanMemberPeer, Seen: uint64(ts.Nano())}); err != nil {
		t.Fatal(err)
	}
	ret, d, err := prog.Benchmark(frame, 1000000, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := newShortbridgeProgram(2, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	_, dsb, err := sb.Benchmark(frame, 1000000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var c [4]uint64
	for slot := range c {
		if c[slot], err = sumPerCPU(maps.stats, uint32(slot)); err != nil {
			t.Fatal(err)
		}
	}
	if ret != 7 /* TC_ACT_REDIRECT */ || c[0] != 1000000 {
		t.Errorf("the LAN program returned %d and counted unicast, flooded, filtered, learnt %v; want 7 and 1000000 unicast", ret, c)
	}
	t.Logf("LAN program: %v per frame, shortbridge %v", d, dsb)
}
