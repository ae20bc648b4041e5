package cluster

import (
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotLeader: a fenced write was refused because its writer no longer holds the election key
// it was fenced with (its session expired or was revoked, or the key was deleted): another may
// lead now.
var ErrNotLeader = errors.New("not the leader any more")

// Fence is a leadership: the key its holder holds in an etcd election and that key's create
// revision (concurrency.Election's Key and Rev). While the key exists with that create revision
// its holder leads: a key that went never comes back with the same revision.
type Fence struct {
	Key string
	Rev int64
}

// Fenced returns a store over the same client whose placement writes (PutPlacement,
// DropPlacement) each hold only while f does: their transactions also compare the fence key's
// create revision, so that a placer that lost its leadership, even one that has not noticed
// yet (a write computed before, or delayed in etcd across a quorum loss), writes nothing. A
// refused write returns ErrNotLeader.
func (s *Store) Fenced(f Fence) *Store { return &Store{cli: s.cli, fence: &f} }

// guard adds the fence's compare, if the store has one, to a transaction's compares.
func (s *Store) guard(cmps ...clientv3.Cmp) []clientv3.Cmp {
	if s.fence == nil {
		return cmps
	}
	return append(cmps, clientv3.Compare(clientv3.CreateRevision(s.fence.Key), "=", s.fence.Rev))
}

// fenceGet is the read a failed fenced transaction makes of the fence key, to tell a lost
// leadership from another conflict (none for an unfenced store).
func (s *Store) fenceGet() []clientv3.Op {
	if s.fence == nil {
		return nil
	}
	return []clientv3.Op{clientv3.OpGet(s.fence.Key)}
}

// lostFence tells whether a failed transaction, whose last answer is fenceGet's, failed because
// the fence key is gone or was made anew.
func (s *Store) lostFence(resp *clientv3.TxnResponse) error {
	if s.fence == nil || len(resp.Responses) == 0 {
		return nil
	}
	kvs := resp.Responses[len(resp.Responses)-1].GetResponseRange().Kvs
	if len(kvs) > 0 && kvs[0].CreateRevision == s.fence.Rev {
		return nil
	}
	return fmt.Errorf("%w: election key %s of revision %d is gone", ErrNotLeader, s.fence.Key, s.fence.Rev)
}
