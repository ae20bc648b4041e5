// Package cluster keeps the state of a trellis cluster in etcd (docs/design.md, decision 10;
// the key layout is in docs/cluster.md): the desired networks of each tenant, their placements
// onto machines, the machines' registrations (bound to leases) and the status each agent
// reports. Trellis implements no consensus of its own: every change that must not race is one
// etcd transaction that compares revisions, and machines come and go with their leases.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/pki"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Sentinel errors; the errors returned wrap them with what and where.
var (
	// ErrConflict: another writer changed the same key between this one's read and its write.
	ErrConflict = errors.New("conflict")
	// ErrNotFound: no such network, placement or machine.
	ErrNotFound = errors.New("not found")
	// ErrMachineTaken: a machine of that name is registered by another agent.
	ErrMachineTaken = errors.New("machine name already registered")
	// ErrUnreachable: etcd did not answer in time.
	ErrUnreachable = errors.New("etcd unreachable")
	// ErrBadName: a tenant, network or machine name that cannot be a key part.
	ErrBadName = errors.New("bad name")
)

// DialTimeout is how long Dial waits for etcd before it gives up with ErrUnreachable: below
// the 5 s within which bad input must get its error.
const DialTimeout = 4 * time.Second

// Config says how to reach the cluster's etcd.
type Config struct {
	Endpoints []string  // client URLs, https://HOST:2379
	TLS       pki.Files // CA, certificate and key of this client
}

// Store is the cluster's state in etcd, as one client sees it.
type Store struct {
	cli   *clientv3.Client
	fence *Fence // see Fenced; nil: writes hold whoever makes them
}

// Dial connects to etcd and checks within DialTimeout that it answers.
func Dial(ctx context.Context, c Config) (*Store, error) {
	if len(c.Endpoints) == 0 {
		return nil, fmt.Errorf("cluster: no etcd endpoints; give --etcd https://HOST:2379[,...]")
	}
	tc, err := c.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cli, err := clientv3.New(ClientConfig(c.Endpoints, tc))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w: %v", ErrUnreachable, err)
	}
	s := New(cli)
	if err := s.Ping(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return s, nil
}

// ClientConfig is the configuration of an etcd client of the cluster: quiet, and quick to notice
// a member that went and to reconnect when it is back (gRPC's own backoff grows to two minutes,
// which would leave an agent behind long after etcd returned).
func ClientConfig(endpoints []string, tc *tls.Config) clientv3.Config {
	return clientv3.Config{
		Endpoints: endpoints, TLS: tc, DialTimeout: DialTimeout,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		Logger: zap.NewNop(), // the client's retries would flood the user's terminal
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		})},
	}
}

// New returns the store over an etcd client the caller made (and closes).
func New(cli *clientv3.Client) *Store { return &Store{cli: cli} }

// Client is the etcd client, for the concurrency package (leases, elections).
func (s *Store) Client() *clientv3.Client { return s.cli }

// Close closes the client.
func (s *Store) Close() error { return s.cli.Close() }

// Ping reads one key, which needs a quorum, within DialTimeout.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	if _, err := s.cli.Get(ctx, PingKey); err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	return nil
}

// unreachable wraps an error of etcd: a timeout becomes ErrUnreachable, naming the endpoints;
// permission denied becomes ErrDenied, saying what to check.
func unreachable(err error, endpoints []string) error {
	if errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserEmpty) {
		return fmt.Errorf("cluster: %w: etcd refused the request to this certificate's user: a tenant reaches only its own networks "+
			"(is the context file's tenant the one its certificate was issued for? tenant commands need the administrator's certificate)", ErrDenied)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("cluster: %w at %v within %v (is etcd running, and does it trust this certificate?)", ErrUnreachable, endpoints, DialTimeout)
	}
	return fmt.Errorf("cluster: %w", err)
}

// nameRE is what tenant, network and machine names may be: key parts with no "/" and nothing
// that could read as another prefix.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// checkName refuses a name that cannot be a key part.
func checkName(what, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %s %q: use letters, digits, - and _ (at most 63, starting with a letter or digit)", ErrBadName, what, name)
	}
	return nil
}

// checkNames checks a tenant's and a network's names.
func checkNames(tenant, network string) error {
	if err := checkName("tenant", tenant); err != nil {
		return err
	}
	return checkName("network", network)
}
