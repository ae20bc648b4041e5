package etcdtest

import (
	"context"
	"net"
	"runtime"

	"github.com/vishvananda/netns"
	"google.golang.org/grpc"
)

// dialer returns the gRPC option that makes the test's connections in the cluster's network
// namespace, when it runs in one: a socket belongs to the namespace of the thread that made it,
// so the dial runs on a thread locked into that namespace for the moment.
func (c *Cluster) dialer() []grpc.DialOption {
	if c.opts.Netns == "" {
		return nil
	}
	ns := c.opts.Netns
	return []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return dialIn(ctx, ns, addr)
	})}
}

// dialIn connects to addr from namespace name. The thread goes back to its namespace after; if
// it cannot, it stays locked, and the runtime ends it with the goroutine.
func dialIn(ctx context.Context, name, addr string) (net.Conn, error) {
	target, err := netns.GetFromName(name)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if netns.Set(orig) == nil {
		runtime.UnlockOSThread()
	}
	return conn, err
}
