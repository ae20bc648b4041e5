package placer

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// nextChange blocks until one of the watches of networks and machines has news or tick fires,
// then takes every response already queued on either watch, so that a pass follows all the
// changes that arrived during the last one: one pass instead of one per response (during a
// hundred `up --cluster` at once, each pass lists and checks every network). It returns an
// error when a watch ended or broke, and ctx's error when ctx ends.
func nextChange(ctx context.Context, nets, machines clientv3.WatchChan, tick <-chan time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case wr, ok := <-nets:
		if err := watchErr("networks", wr, ok); err != nil {
			return err
		}
	case wr, ok := <-machines:
		if err := watchErr("machines", wr, ok); err != nil {
			return err
		}
	case <-tick:
	}
	for {
		select {
		case wr, ok := <-nets:
			if err := watchErr("networks", wr, ok); err != nil {
				return err
			}
		case wr, ok := <-machines:
			if err := watchErr("machines", wr, ok); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// watchErr says why a watch of what is over, if it is (ok false: its channel closed).
func watchErr(what string, wr clientv3.WatchResponse, ok bool) error {
	if !ok || wr.Err() != nil {
		return fmt.Errorf("watch of %s ended: %v", what, wr.Err())
	}
	return nil
}
