package cgroup

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/trellisnet/trellis/internal/testkit"
)

func TestParseCPUList(t *testing.T) {
	cases := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0", []int{0}, true},
		{"0-2,5", []int{0, 1, 2, 5}, true},
		{"3-3", []int{3}, true},
		{"2-1", nil, false},
		{"", nil, false},
		{"a", nil, false},
		{"0-", nil, false},
		{"-1", nil, false},
		{"5000", nil, false},
	}
	for _, c := range cases {
		got, err := ParseCPUList(c.in)
		if (err == nil) != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestCheck(t *testing.T) {
	online, err := onlineCPUs()
	if err != nil {
		testkit.Skipf(t, "%v: the test needs /sys/devices/system/cpu/online (sysfs mounted)", err)
	}
	n := len(online)
	cases := []struct {
		l  Limits
		ok bool
	}{
		{Limits{}, true},
		{Limits{CPUs: 0.5, Cpuset: "0"}, true},
		{Limits{CPUs: float64(n)}, true},
		{Limits{CPUs: float64(n) + 0.5}, false},
		{Limits{Cpuset: fmt.Sprint(4095)}, false}, // a core no test machine has
		{Limits{Cpuset: "x"}, false},
	}
	for _, c := range cases {
		err := Check(c.l)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrLimit)) {
			t.Errorf("Check(%+v) = %v, want ok=%v", c.l, err, c.ok)
		}
	}
}

func TestField(t *testing.T) {
	text := "usage_usec 1500\nuser_usec 1000\noom_kill 3\n"
	cases := []struct {
		key  string
		want int64
	}{{"usage_usec", 1500}, {"oom_kill", 3}, {"missing", 0}}
	for _, c := range cases {
		if got := field(text, c.key); got != c.want {
			t.Errorf("field(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}
