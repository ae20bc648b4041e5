/*
 * trellis-enter runs one command inside a trellis container node (package node, enter.go).
 *
 * Usage: trellis-enter PIDFD -- COMMAND [ARG...]
 *
 * PIDFD is an open pidfd of the node's init, checked by trellis (node.JoinMain) before it
 * executed this program from a sealed in-memory file. The program enters every namespace of the
 * init with ONE setns(2) on that pidfd, user namespace included: entering the mount namespace
 * sets the root and the working directory to the node's root, so no directory of the host is
 * open when anything of the node runs. It becomes the node's root (uid and gid 0 of the node's
 * user namespace), closes every descriptor but 0, 1 and 2, and forks: the child, the first
 * process of the node's PID namespace that this makes, executes COMMAND, found on PATH in the
 * node's own file system; the parent forwards the signals sent to it and exits as the command
 * does. Nothing the node can mount over or change (its /proc, its programs) is executed or
 * trusted before the command itself, which is the node's by design.
 *
 * Why C: a process can enter a user namespace, or a mount namespace, only while it has a
 * single thread (setns(2): EINVAL otherwise), and a Go program always runs several. runc
 * enters containers the same way, from C (nsexec) that runs before the Go runtime starts.
 *
 * Built static (no dynamic loader or library is looked up in the node after setns) by
 * `go generate ./internal/node`, committed as enter.bin and embedded in trellis.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NAMESPACES (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | \
		    CLONE_NEWPID | CLONE_NEWCGROUP)

/* Exit codes of the shell: a command that cannot be found, one that cannot be run. */
enum { NOT_FOUND = 127, CANNOT_RUN = 126 };

static void die(const char *what)
{
	fprintf(stderr, "trellis: entering the node: %s: %s\n", what, strerror(errno));
	exit(NOT_FOUND);
}

/* enter joins the namespaces of the init behind pidfd and becomes the node's root. */
static void enter(int pidfd)
{
	/* Not dumpable: no process of the node may ptrace this one or open its /proc files. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		die("not dumpable");
	if (setns(pidfd, NAMESPACES) != 0)
		die("setns");
	if (setgroups(0, NULL) != 0)
		die("setgroups");
	if (setresgid(0, 0, 0) != 0)
		die("setresgid");
	if (setresuid(0, 0, 0) != 0)
		die("setresuid");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) /* a change of ids may have reset it */
		die("not dumpable");
	if (chdir("/") != 0)
		die("chdir /");
	/* Nothing of the host's passes into the node but the caller's standard files. */
	if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
		die("close_range");
}

/* run is the child: the first process of the node's PID namespace that this enter makes. */
static void run(char **argv, const sigset_t *mask)
{
	sigprocmask(SIG_SETMASK, mask, NULL);
	execvp(argv[0], argv);
	int err = errno;
	if (err == ENOENT || err == ENOTDIR)
		fprintf(stderr, "trellis: %s: no such program in the node's file system "
			"(a node with `rootfs:` has only that directory's programs)\n", argv[0]);
	else
		fprintf(stderr, "trellis: %s: %s\n", argv[0], strerror(err));
	_exit(err == ENOENT || err == ENOTDIR ? NOT_FOUND : CANNOT_RUN);
}

/* die_as ends this process as status says the child ended: same exit code or signal. */
static void die_as(int status)
{
	if (WIFEXITED(status))
		exit(WEXITSTATUS(status));
	int sig = WTERMSIG(status);
	struct rlimit none = {0, 0};
	setrlimit(RLIMIT_CORE, &none); /* the child dumped its core if it was to */
	signal(sig, SIG_DFL);
	sigset_t one;
	sigemptyset(&one);
	sigaddset(&one, sig);
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	kill(getpid(), sig);
	exit(128 + sig);
}

/*
 * wait_child waits for the child to end, forwarding the signals that a process sent to this
 * one (those the kernel sent, such as a terminal's ^C to the foreground process group, reached
 * the child too), and stopping when the child stops (^Z), so that the caller's job control sees
 * it.
 */
static void wait_child(pid_t child, const sigset_t *waited)
{
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(waited, &si);
		if (sig < 0)
			continue; /* EINTR */
		if (sig != SIGCHLD) {
			if (si.si_code <= 0) /* SI_USER, SI_QUEUE, SI_TKILL: sent by a process */
				kill(child, sig);
			continue;
		}
		int status;
		pid_t pid;
		while ((pid = waitpid(child, &status, WNOHANG | WUNTRACED)) == child) {
			if (!WIFSTOPPED(status))
				die_as(status);
			kill(getpid(), SIGSTOP);
			kill(child, SIGCONT);
		}
	}
}

int main(int argc, char **argv)
{
	char *end;
	long pidfd = argc > 3 ? strtol(argv[1], &end, 10) : -1;
	if (argc <= 3 || *end != '\0' || pidfd < 0 || strcmp(argv[2], "--") != 0) {
		fprintf(stderr, "usage: %s PIDFD -- COMMAND [ARG...]\n", argv[0]);
		return 2;
	}
	/* Every signal but those of faults waits for sigwaitinfo, from before the fork on. */
	sigset_t waited, mask;
	sigfillset(&waited);
	int faults[] = {SIGKILL, SIGSTOP, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
	for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
		sigdelset(&waited, faults[i]);
	sigprocmask(SIG_BLOCK, &waited, &mask);
	enter((int)pidfd);
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0)
		run(argv + 3, &mask);
	wait_child(child, &waited);
	return NOT_FOUND;
}
