package container

import (
	"fmt"
	"os"
	"strings"

	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// execEnv is how a node's exec: lines run: a node of an image's as imageEnv says, another's
// with trellis's environment and the node's env:.
func execEnv(n *plan.Node) noderuntime.RunAs {
	if n.Run != nil {
		return imageEnv(n.Run)
	}
	if n.ImageSet == nil || len(n.ImageSet.Env) == 0 {
		return noderuntime.RunAs{}
	}
	return noderuntime.RunAs{Env: spec.MergeEnv(noderuntime.Env, n.ImageSet.Env)}
}

// imageEnv is how exec: lines run in a node of an image: with the image's environment (PATH
// from noderuntime.Env if the image sets none, HOME too) and working directory, as the node's root.
func imageEnv(run *spec.ImageRun) noderuntime.RunAs {
	if run == nil {
		return noderuntime.RunAs{}
	}
	env := append([]string{}, run.Env...)
	for _, def := range noderuntime.Env {
		k, _, _ := strings.Cut(def, "=")
		if !hasVar(env, k) {
			env = append(env, def)
		}
	}
	return noderuntime.RunAs{Env: env, Dir: run.Dir}
}

func hasVar(env []string, k string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, k+"=") {
			return true
		}
	}
	return false
}

// mainProcess starts the image's Entrypoint and Cmd as the node's main process: as the
// config's User, in its WorkingDir, with its Env, its output in the node's log, left to the
// node's PID 1 (it runs until it exits or the node stops). It fails if the program cannot be
// executed.
func mainProcess(pid int, run *spec.ImageRun, log *os.File, logPath string) error {
	as := imageEnv(run)
	as.User, as.Detach = run.User, true
	fmt.Fprintf(log, "$ %s (the image's entrypoint and cmd, as %s)\n", strings.Join(run.Argv, " "), userOr(run.User))
	cmd, err := noderuntime.CommandAs(pid, as, run.Argv...)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("image %s: its entrypoint %q could not start (%v); the node's log:\n%s", run.Ref, run.Argv, err, tail(logPath, 10))
	}
	return nil
}

func userOr(u string) string {
	if u == "" {
		return "root"
	}
	return u
}
