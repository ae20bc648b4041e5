package container

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// nodeNS is an open handle on a node's network namespace.
type nodeNS struct {
	ns netns.NsHandle
	nl *netlink.Handle
}

func openNS(pid int) (*nodeNS, error) {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return nil, fmt.Errorf("node network namespace: %w", err)
	}
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink in node: %w", err)
	}
	return &nodeNS{ns: ns, nl: nl}, nil
}

func (n *nodeNS) Close() {
	n.nl.Close()
	n.ns.Close()
}

// sysctl writes net.* sysctls in the node's network namespace. /proc/sys/net shows the network
// namespace of the thread that opens it, so one locked thread switches in and back.
func (n *nodeNS) sysctl(values map[string]string) error {
	runtime.LockOSThread()
	origin, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer origin.Close()
	if err := netns.Set(n.ns); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	werr := writeSysctls(values)
	if err := netns.Set(origin); err != nil {
		// Leave the thread locked: the runtime discards it with the goroutine, rather than
		// let it run other goroutines inside the node.
		return fmt.Errorf("returning from node network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return werr
}

func writeSysctls(values map[string]string) error {
	for k, v := range values {
		if err := writeSysctl(k, v); err != nil {
			return err
		}
	}
	return nil
}

// writeSysctl writes one sysctl, named as sysctl(8) names it: with dots, or with slashes.
func writeSysctl(key, value string) error {
	if !strings.Contains(key, "/") {
		key = strings.ReplaceAll(key, ".", "/")
	}
	path := filepath.Join("/proc/sys", key)
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
