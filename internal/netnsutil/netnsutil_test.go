package netnsutil

import "testing"

func TestCPUMask(t *testing.T) {
	for _, c := range []struct {
		cpu  int
		want string
	}{{-1, "0"}, {0, "00000001"}, {1, "00000002"}, {31, "80000000"}, {33, "00000002,00000000"}} {
		if got := CPUMask(c.cpu); got != c.want {
			t.Errorf("CPUMask(%d) = %s, want %s", c.cpu, got, c.want)
		}
	}
}
