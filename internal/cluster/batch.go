package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// MaxTxnOps is etcd's default limit of operations in one transaction (--max-txn-ops): of its
// compares, and of each of its branches.
const MaxTxnOps = 128

// maxBatchBytes bounds the values of one batch of placements, under etcd's default largest
// request (--max-request-bytes, 1.5 MiB).
const maxBatchBytes = 1 << 20

// PlacementWrite is a placement to write and the revision of the placement it replaces (0:
// none), as PutPlacement takes them.
type PlacementWrite struct {
	Placement *Placement
	Expect    int64
}

// PutPlacements writes placements as PutPlacement does, each under the same conditions (and
// the fence of a fenced store), in as few transactions as etcd's limits allow: up to
// (MaxTxnOps-1)/2 placements (two compares each, and the fence's) and maxBatchBytes of values
// each. A batch that etcd refuses because one of its placements conflicts is written again one
// placement at a time, so that only those that conflict fail. It returns one error per write,
// in order (nil: written, and its Placement.Revision set); once the fence is found gone, every
// write not yet made fails with ErrNotLeader.
func (s *Store) PutPlacements(ctx context.Context, ws []PlacementWrite) []error {
	errs := make([]error, len(ws))
	datas := make([][]byte, len(ws))
	for i, w := range ws {
		if errs[i] = checkNames(w.Placement.Tenant, w.Placement.Network); errs[i] != nil {
			continue
		}
		w.Placement.Placed = time.Now().UTC()
		datas[i], errs[i] = json.Marshal(w.Placement)
	}
	perTxn := (MaxTxnOps - 1) / 2
	for start := 0; start < len(ws); {
		var batch []int
		size := 0
		end := start
		for ; end < len(ws) && len(batch) < perTxn; end++ {
			if errs[end] != nil {
				continue
			}
			if len(batch) > 0 && size+len(datas[end]) > maxBatchBytes {
				break
			}
			batch = append(batch, end)
			size += len(datas[end])
		}
		start = end
		if len(batch) == 0 {
			continue
		}
		err := s.putBatch(ctx, ws, datas, batch)
		if errors.Is(err, errBatchConflict) { // which ones conflict: each on its own
			err = nil
			for k, i := range batch {
				_, errs[i] = s.PutPlacement(ctx, ws[i].Placement, ws[i].Expect)
				if errors.Is(errs[i], ErrNotLeader) {
					err, batch = errs[i], batch[k:]
					break
				}
			}
		}
		if err != nil {
			for _, i := range batch {
				errs[i] = err
			}
		}
		if errors.Is(err, ErrNotLeader) {
			for i := start; i < len(ws); i++ {
				errs[i] = err
			}
			return errs
		}
	}
	return errs
}

// errBatchConflict: some placement of a batch conflicts (which one, putBatch does not say).
var errBatchConflict = errors.New("a placement of the batch conflicts")

// putBatch writes the placements ws[i] of batch (i in batch) in one transaction.
func (s *Store) putBatch(ctx context.Context, ws []PlacementWrite, datas [][]byte, batch []int) error {
	cmps := make([]clientv3.Cmp, 0, 2*len(batch)+1)
	ops := make([]clientv3.Op, 0, len(batch))
	for _, i := range batch {
		p := ws[i].Placement
		nkey, pkey := NetworkKey(p.Tenant, p.Network), PlacementKey(p.Tenant, p.Network)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(nkey), "=", p.Generation),
			clientv3.Compare(clientv3.ModRevision(pkey), "=", ws[i].Expect))
		ops = append(ops, clientv3.OpPut(pkey, string(datas[i])))
	}
	resp, err := s.cli.Txn(ctx).If(s.guard(cmps...)...).Then(ops...).Else(s.fenceGet()...).Commit()
	if err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	if !resp.Succeeded {
		if err := s.lostFence(resp); err != nil {
			return err
		}
		return errBatchConflict
	}
	for _, i := range batch {
		ws[i].Placement.Revision = resp.Header.Revision
	}
	return nil
}
