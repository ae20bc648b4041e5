package noderuntime

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
)

// protectInit sets the init's oom_score_adj to -1000 before anything of the node runs: when
// the node runs out of memory, the kernel kills its other processes (none of which the init
// starts), never the init that holds the node. It takes
// CAP_SYS_RESOURCE, which some machines withhold even from root (then the init, small, is
// merely unlikely to go).
func protectInit(pid int) error {
	err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("-1000"), 0)
	if errors.Is(err, os.ErrPermission) {
		return nil
	}
	return err
}

// sendConfig hands the init its configuration and closes the pipe.
func sendConfig(w *os.File, cfg Config) error {
	err := json.NewEncoder(w).Encode(cfg)
	if err2 := w.Close(); err == nil {
		err = err2
	}
	return err
}
