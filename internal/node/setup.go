package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// SetupArg0 is the name of the short-lived process that makes a node's file system, as host
// root in a new mount namespace, then starts the node's init in the node's user namespace and
// exits. Mounts copied into a mount namespace of a less privileged user namespace are locked:
// the node's root cannot unmount its private directories to reach the host's beneath, nor make
// the host's file system writable again.
const SetupArg0 = "trellis-node-setup"

// setupConfig is what SetupMain reads on its stdin: the node's configuration, and the marker
// its init runs under.
type setupConfig struct {
	Config
	Marker []string
}

// SetupMain is the setup process (SetupArg0). It reports the init's pid on fd 3 ("pid N"), then
// exits; the init reports there that the node is ready.
func SetupMain() {
	ready := os.NewFile(3, "ready")
	var cfg setupConfig
	err := json.NewDecoder(os.Stdin).Decode(&cfg)
	if err == nil {
		// The init inherits it: when the node runs out of memory, the kernel kills its other
		// processes, never the init that holds the node. It takes CAP_SYS_RESOURCE, which some
		// machines withhold even from root (then the init, small, is merely unlikely to go).
		if werr := os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0); werr != nil && !errors.Is(werr, os.ErrPermission) {
			err = werr
		}
	}
	if err == nil {
		err = mountPrivate(cfg.Config)
	}
	if err == nil {
		err = startInit(cfg, ready)
	}
	if err != nil {
		fmt.Fprintf(ready, "error: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startInit starts the node's init in new user, mount, network, UTS, IPC and PID namespaces,
// the user namespace first so that it owns the others, and hands it its configuration.
func startInit(cfg setupConfig, ready *os.File) error {
	conf, confW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer confW.Close()
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(cfg.UIDBase), Size: UIDRange}}
	cmd := &exec.Cmd{
		Path:       "/proc/self/fd/4", // the trellis binary, which the node's root may not reach by its path
		Args:       cfg.Marker,
		Stdin:      conf,
		ExtraFiles: []*os.File{ready, os.NewFile(4, "exe")},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: namespaces,
			// setgroups stays allowed, for daemons that call initgroups when they drop to
			// their own user (FRR, BIRD).
			UidMappings: ids, GidMappings: ids, GidMappingsEnableSetgroups: true,
			Credential: &syscall.Credential{Uid: 0, Gid: 0}, // the node's root, not an unmapped uid
		},
		Env: os.Environ(),
	}
	err = cmd.Start()
	conf.Close()
	if err != nil {
		return fmt.Errorf("starting the node's init: %w", err)
	}
	// If trellis is gone (killed while it started the node), the write fails and the init,
	// never configured, goes with the setup process: nothing is left that no one will find.
	if _, err := fmt.Fprintf(ready, "pid %d\n", cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		return err
	}
	return json.NewEncoder(confW).Encode(cfg.Config)
}
