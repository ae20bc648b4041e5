package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/testkit"
)

// TestReconcileMetrics scrapes an empty state directory after two ups were observed.
func TestReconcileMetrics(t *testing.T) {
	st, err := state.Open(testkit.TempStateDir(t))
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
