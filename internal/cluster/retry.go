package cluster

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// attemptTimeout bounds one try of a write that txnOnce may try again.
const attemptTimeout = 1500 * time.Millisecond

// transient tells whether an etcd error may pass by itself: the cluster is electing a leader
// (a member was lost), or the connection to one member broke. Whether a transaction that got
// such an error was applied is not known: the caller must find out before trying again.
func transient(err error) bool {
	for _, e := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrLeaderChanged, rpctypes.ErrNoLeader} {
		if errors.Is(err, e) || err.Error() == e.Error() {
			return true
		}
	}
	return status.Code(err) == codes.Unavailable
}

// txnOnce commits a transaction that writes value at key, and, when the answer is lost to a
// transient error, finds out whether it was applied (the key holds exactly value: every value
// written has its own time stamp) before building and trying it again. So a member or a leader
// lost during the write is not noticed; ctx bounds the tries.
func (s *Store) txnOnce(ctx context.Context, key, value string, build func(context.Context) clientv3.Txn) (*clientv3.TxnResponse, error) {
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		// One try waits at most attemptTimeout: a member whose leader just died holds a
		// request for etcd's whole request timeout (7 s), while a new leader is there in 1 s.
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		resp, err := build(actx).Commit()
		cancel()
		if err == nil || !(transient(err) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil)) {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		got, gerr := s.cli.Get(ctx, key)
		if gerr != nil {
			continue
		}
		if len(got.Kvs) > 0 && string(got.Kvs[0].Value) == value {
			// Applied: answer as the transaction would have, with the revision of the write.
			return &clientv3.TxnResponse{Header: &etcdserverpb.ResponseHeader{Revision: got.Kvs[0].ModRevision}, Succeeded: true}, nil
		}
	}
}
