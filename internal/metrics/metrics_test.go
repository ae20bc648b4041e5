package metrics

import (
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/state"
)

func TestParseNetDev(t *testing.T) {
	const good = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth1:    1234      10    0    2    0     0          0         0     5678      20    0    3    0     0       0          0
`
	cases := []struct {
		name, data string
		want       map[string]ifStats
		err        string
	}{
		{"two interfaces", good, map[string]ifStats{"lo": {}, "eth1": {RxBytes: 1234, RxFrames: 10, RxDrops: 2, TxBytes: 5678, TxFrames: 20, TxDrops: 3}}, ""},
		{"headers only", "a\nb\n", map[string]ifStats{}, ""},
		{"short line", "a\nb\n eth1: 1 2 3\n", nil, "3 fields"},
		{"no colon", "a\nb\n eth1 1 2\n", nil, "no colon"},
		{"not a number", "a\nb\n eth1: 1 2 3 x 5 6 7 8 9 10 11 12 13 14 15 16\n", nil, "invalid syntax"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseNetDev([]byte(c.data))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s: got %+v, want %+v", k, got[k], v)
				}
			}
		})
	}
}

// TestReconcileMetrics scrapes an empty state directory after two ups were observed.
func TestReconcileMetrics(t *testing.T) {
	st, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	c := New(st)
	c.ObserveUp("ring", 300*time.Millisecond, nil)
	c.ObserveUp("ring", 2*time.Second, io.ErrUnexpectedEOF)
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`trellis_reconcile_duration_seconds_count{network="ring"} 2`,
		`trellis_reconcile_duration_seconds_bucket{network="ring",le="0.390625"} 1`,
		`trellis_reconcile_errors_total{network="ring"} 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "trellis_network_info") {
		t.Errorf("an empty state directory shows networks:\n%s", text)
	}
}
