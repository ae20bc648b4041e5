package placer

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestNextChange: the responses queued on both watches give one pass (nextChange takes them
// all), a broken or closed watch ends the placer's loop, and the tick alone gives a pass.
func TestNextChange(t *testing.T) {
	broken := clientv3.WatchResponse{CompactRevision: 5}
	for _, tc := range []struct {
		name           string
		nets, machines []clientv3.WatchResponse
		closeNets      bool
		tick           bool
		wantErr        bool
	}{
		{name: "queued changes of both", nets: make([]clientv3.WatchResponse, 5), machines: make([]clientv3.WatchResponse, 3)},
		{name: "one change", machines: make([]clientv3.WatchResponse, 1)},
		{name: "tick only", tick: true},
		{name: "broken watch after changes", nets: []clientv3.WatchResponse{{}, {}, broken}, wantErr: true},
		{name: "broken machines' watch", machines: []clientv3.WatchResponse{broken}, wantErr: true},
		{name: "closed watch", closeNets: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nets := make(chan clientv3.WatchResponse, 10)
			machines := make(chan clientv3.WatchResponse, 10)
			tick := make(chan time.Time, 1)
			for _, wr := range tc.nets {
				nets <- wr
			}
			for _, wr := range tc.machines {
				machines <- wr
			}
			if tc.closeNets {
				close(nets)
			}
			if tc.tick {
				tick <- time.Now()
			}
			err := nextChange(context.Background(), nets, machines, tick)
			if (err != nil) != tc.wantErr {
				t.Fatalf("nextChange: %v, want an error: %v", err, tc.wantErr)
			}
			if !tc.wantErr && (len(nets) != 0 || len(machines) != 0) {
				t.Errorf("%d networks' and %d machines' responses left queued: one pass must follow them all", len(nets), len(machines))
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := nextChange(ctx, nil, nil, nil); err != context.Canceled {
		t.Errorf("nextChange after ctx ended: %v, want context.Canceled", err)
	}
}
