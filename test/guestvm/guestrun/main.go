// Command guestrun runs a command in a guest kernel with this machine's userspace
// (test/guestvm; docs/guest-kernel.md):
//
//	guestrun [--kernel 6.1] [--memory 3G] [--cpus 2] [--timeout 10m] [--env K=V]... [--work DIR] -- CMD ARGS...
//
// What the command writes under /run/guestvm in the guest reaches the host in DIR/results with
// --work DIR (kept after the run; without it the run's files are removed): figures of a bench
// run in the guest, for example (docs/guest-kernel.md).
//
// It prints the guest's console (kernel messages and the command's output) and exits with the
// command's exit code, or 125 if the guest could not run it (what is missing, and how to get it,
// is said). It must be built static (CGO_ENABLED=0): it is also the guest's init.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/test/guestvm"
)

type envFlag []string

func (e *envFlag) String() string     { return fmt.Sprint(*e) }
func (e *envFlag) Set(v string) error { *e = append(*e, v); return nil }

func main() {
	if guestvm.IsGuest() {
		guestvm.Init()
	}
	kernel := flag.String("kernel", "6.1", "the guest kernel: a Debian series (6.1) or release (6.1.0-56-amd64)")
	cache := flag.String("cache", guestvm.DefaultCache, "where kernels are unpacked (CACHE/guest-kernels)")
	memory := flag.String("memory", "3G", "the guest's memory")
	cpus := flag.Int("cpus", 2, "the guest's vCPUs")
	timeout := flag.Duration("timeout", 10*time.Minute, "the longest the run may take, boot included")
	dir := flag.String("dir", "", "the command's working directory (default: this one)")
	work := flag.String("work", "", "keep the run's files in this directory: what the command writes under /run/guestvm is in DIR/results (default: a temporary directory, removed)")
	var env envFlag
	flag.Var(&env, "env", "K=V for the command's environment (repeatable; PATH and HOME have defaults)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: guestrun [flags] -- CMD ARGS...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := guestvm.Check(ctx)
	var k guestvm.Kernel
	if err == nil {
		k, err = guestvm.FetchKernel(ctx, *cache, *kernel, os.Stderr)
	}
	if err != nil {
		fail(err)
	}
	if _, err := os.Stat(filepath.Join(*work, "results")); *work != "" && err == nil {
		// A status left by an earlier run would be taken for this one's.
		fail(fmt.Errorf("--work %s: it holds an earlier run's results; remove them or name a new directory", *work))
	}
	if *dir == "" {
		*dir, _ = os.Getwd()
	}
	res, err := guestvm.Run(ctx, guestvm.Config{
		Kernel: k, Argv: flag.Args(), Env: env, Dir: *dir, Memory: *memory, CPUs: *cpus,
		Timeout: *timeout, Console: os.Stdout, Work: *work,
	})
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "guestrun: Linux %s booted in %.1fs; the command exited %d after %.1fs in all\n",
		k.Release, res.Boot.Seconds(), res.ExitCode, res.Total.Seconds())
	os.Exit(res.ExitCode)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "guestrun:", err)
	if errors.Is(err, guestvm.ErrMissing) {
		fmt.Fprintln(os.Stderr, "guestrun: see docs/guest-kernel.md for what the harness needs")
	}
	os.Exit(125)
}
