/*
 * trellis-node-pid1 is what a trellis container node's init becomes once the node is set up:
 * the init program (package nodeinit, Go) makes the node's cgroup namespace, hostname, /proc,
 * /sys, files, loopback and seccomp filter, then executes this program in its place, as the
 * node's PID 1, with the same command line (the node's marker, package node) and its ready
 * pipe as fd 3.
 *
 * It closes every descriptor but its standard input, output and error (/dev/null; the init
 * may have inherited descriptors of trellis's caller, which must not stay open in the node),
 * says the node is ready ("ok" on fd 3, then closes it) and sleeps for good. It ignores
 * every signal that can be ignored: nothing but SIGKILL (trellis's Kill, `down`) ends it, as
 * the Go init ignored or caught them. Ignoring SIGCHLD makes the kernel reap the children it
 * inherits (daemons whose parent exited) as they end: no zombie is left, and no wait loop
 * wakes the init. Killing it ends the node: the kernel kills every process of the PID
 * namespace and frees the network namespace with its interfaces.
 *
 * Why C: a Go program always runs several threads (its main thread, the runtime's monitor,
 * the thread it starts with), each one of the host's tasks (pid_max), and a Go process keeps
 * about half a megabyte of its own memory; this one is a single task and a few pages.
 *
 * Built static (nothing of the node's file system is loaded) by `go generate ./internal/node`,
 * committed as pid1.bin, embedded in trellis and executed from a sealed in-memory file.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(void)
{
	static const char ok[] = "ok\n";
	struct sigaction ignore = { .sa_handler = SIG_IGN };
	sigset_t none;

	if (getpid() != 1)
		return 2; /* only ever a node's init */
	/* SIGKILL, SIGSTOP and the C library's own two signals refuse SIG_IGN: no matter. */
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &ignore, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Its command name was that of the file it was executed from (the init's /proc/self/fd/5). */
	prctl(PR_SET_NAME, "trellis-node", 0, 0, 0);
	if (close_range(4, ~0U, 0) != 0)
		return 1;
	if (write(3, ok, sizeof ok - 1) != sizeof ok - 1)
		return 1; /* trellis is gone: it would never mark this node ready */
	close(3);
	for (;;)
		pause();
}
