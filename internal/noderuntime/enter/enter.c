/*
 * trellis-enter runs one command inside a trellis container node (package node, exec.go).
 *
 * Usage: trellis-enter PIDFD [-d] [-u UID:GID] [-w DIR] -- COMMAND [ARG...]
 *
 * PIDFD is an open pidfd of the node's init, checked by trellis (node.JoinMain) before it
 * executed this program from a sealed in-memory file. The program enters every namespace of the
 * init with ONE setns(2) on that pidfd, user namespace included: entering the mount namespace
 * sets the root and the working directory to the node's root, so no directory of the host is
 * open when anything of the node runs. It becomes the node's root (uid and gid 0 of the node's
 * user namespace), marks every descriptor but 0, 1 and 2 close-on-exec, and forks: the child,
 * a process of the node's PID namespace, executes COMMAND, found on PATH in the node's own file
 * system; the parent forwards the signals sent to it and exits as the command does. Nothing the
 * node can mount over or change (its /proc, its programs) is executed or trusted before the
 * command itself, which is the node's by design.
 *
 * No terminal of the caller's passes into the node: a process of the node could otherwise push
 * input into the caller's shell (TIOCSTI), or read what the user types after the command ended.
 * Where the caller's standard input, output or error is a terminal, the command's is a
 * pseudo-terminal of the node's own devpts instead, its session's controlling terminal, and the
 * parent relays bytes (input only from a terminal on standard input, in raw mode), the window
 * size and signals between the two. Otherwise the child gives up the caller's controlling
 * terminal, if any (TIOCNOTTY), but keeps its process group, so that a terminal's signals and
 * a kill of the group reach it as before.
 *
 * Options, for a node's main process (a container image's entrypoint): -u runs COMMAND as
 * UID:GID of the node (no supplementary groups), -w in directory DIR of the node, and -d
 * detached: the child forks COMMAND in a session of its own and exits once it was executed
 * (its exit status says whether it could be), so that COMMAND's parent becomes the node's
 * PID 1, as a daemon's does, and this program exits without waiting for it.
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
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define NAMESPACES (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | \
		    CLONE_NEWPID | CLONE_NEWCGROUP)
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Exit codes of the shell: a command that cannot be found, one that cannot be run. */
enum { NOT_FOUND = 127, CANNOT_RUN = 126 };

/* A direction of the relay: bytes read from in, not yet all written to out. */
struct pipe {
	int in, out;
	char buf[4096];
	ssize_t len, off;
};

static pid_t child;
static int ctty = -1;           /* the caller's controlling terminal, if it has one */
static int relay;               /* the command runs on a pty of the node's, relayed */
static int tty_in;              /* relaying: the caller's standard input is a terminal */
static int tty_out = -1;        /* relaying: the caller's terminal to write to (1 or 2), or none */
static int master = -1;         /* relaying: the pty's master */
static struct termios saved;    /* relaying: the caller's terminal's settings */
static struct pipe up, down;    /* relaying: the caller's input, the command's output */
static int detach;              /* -d: COMMAND is left running, a child of the node's PID 1 */
static long run_uid = -1, run_gid = -1; /* -u: the node's ids COMMAND runs as */
static const char *workdir;     /* -w: COMMAND's working directory in the node */

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
	close(pidfd);
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
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
		die("close_range");
}

static int exec_as(char **argv);
static void run_detached(char **argv, const sigset_t *mask);

/* run is the child: it executes the command, with slave (>= 0) as its controlling terminal in
 * place of the caller's terminals. */
static void run(char **argv, const sigset_t *mask, int slave)
{
	if (detach) {
		run_detached(argv, mask);
		return;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* it ends with this program, killed or not */
	if (slave >= 0) {
		if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) != 0)
			die("the node's terminal");
		for (int fd = 0; fd < 3; fd++)
			if (isatty(fd) && dup2(slave, fd) < 0)
				die("the node's terminal");
	} else if (ctty >= 0 && ioctl(ctty, TIOCNOTTY) != 0 && setsid() < 0) {
		die("giving up the caller's terminal"); /* it must never be the command's */
	}
	sigprocmask(SIG_SETMASK, mask, NULL);
	_exit(exec_as(argv));
}

/* exec_as executes the command with the -u ids in the -w directory; if it cannot, it says why
 * and returns the exit status for it. */
static int exec_as(char **argv)
{
	if (workdir && chdir(workdir) != 0) {
		fprintf(stderr, "trellis: working directory %s: %s\n", workdir, strerror(errno));
		return CANNOT_RUN;
	}
	if (run_uid >= 0 && (setgroups(0, NULL) != 0 || setresgid(run_gid, run_gid, run_gid) != 0 ||
			     setresuid(run_uid, run_uid, run_uid) != 0)) {
		fprintf(stderr, "trellis: becoming %ld:%ld: %s\n", run_uid, run_gid, strerror(errno));
		return CANNOT_RUN;
	}
	execvp(argv[0], argv);
	int err = errno;
	if (err == ENOENT || err == ENOTDIR)
		fprintf(stderr, "trellis: %s: no such program in the node's file system "
			"(a node with `rootfs:` has only that directory's programs)\n", argv[0]);
	else
		fprintf(stderr, "trellis: %s: %s\n", argv[0], strerror(err));
	return err == ENOENT || err == ENOTDIR ? NOT_FOUND : CANNOT_RUN;
}

/* run_detached forks the command in a session of its own and exits with 0 once it was
 * executed, or with the shell's status for a command that could not be: the command is left
 * to the node's PID 1, which reaps it. */
static void run_detached(char **argv, const sigset_t *mask)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(p[0]);
		setsid();
		sigprocmask(SIG_SETMASK, mask, NULL);
		unsigned char code = exec_as(argv); /* the write end closes on a successful exec */
		if (write(p[1], &code, 1) != 1)
			_exit(CANNOT_RUN);
		_exit(code);
	}
	close(p[1]);
	unsigned char code;
	if (read(p[0], &code, 1) != 1) /* closed by the exec: the command runs */
		_exit(0);
	_exit(code);
}

/* open_pty opens a pty of the node's devpts (its /dev/ptmx), the size of the caller's. */
static int open_pty(int *slave)
{
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return -1;
	struct winsize ws;
	/* The slave through the master (TIOCGPTPEER), not a path the node could mount over. */
	if (unlockpt(master) != 0 ||
	    (*slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		close(master);
		return -1;
	}
	if (ioctl(tty_in ? 0 : tty_out, TIOCGWINSZ, &ws) == 0)
		ioctl(master, TIOCSWINSZ, &ws);
	return 0;
}

static void restore(void)
{
	if (tty_in)
		tcsetattr(0, TCSADRAIN, &saved);
}

static void raw_mode(void)
{
	if (!tty_in)
		return;
	struct termios raw = saved;
	cfmakeraw(&raw);
	tcsetattr(0, TCSADRAIN, &raw);
}

/* write_all writes n bytes of buf to fd (none: fd < 0), waiting while it is full; 0 if it
 * failed. */
static int write_all(int fd, const char *buf, ssize_t n)
{
	while (fd >= 0 && n > 0) {
		ssize_t w = write(fd, buf, (size_t)n);
		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = {fd, POLLOUT, 0};
			poll(&p, 1, 1000);
			continue;
		}
		if (w < 0 && errno != EINTR)
			return 0;
		if (w > 0)
			buf += w, n -= w;
	}
	return 1;
}

/*
 * die_as ends this process as status says the child ended: same exit code or signal. Relaying,
 * it first passes on what the command wrote last (not what a process it left running writes
 * later) and gives the caller's terminal its settings back.
 */
static void die_as(int status)
{
	if (relay) {
		char buf[4096];
		ssize_t n;
		if (write_all(tty_out, down.buf + down.off, down.len - down.off))
			while ((n = read(master, buf, sizeof buf)) > 0 && write_all(tty_out, buf, n))
				;
		restore();
	}
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
 * on_signal handles one signal. SIGCHLD: the child ended (this program ends as it did) or
 * stopped (this program stops, so that the caller's job control sees it, then continues it).
 * SIGWINCH, relaying: the caller's terminal's size goes to the node's. Others are forwarded:
 * all of them when relaying (the command is in a session of its own); else only those a
 * process sent (a terminal's, sent by the kernel to its foreground process group, reached the
 * child too).
 */
static void on_signal(const struct signalfd_siginfo *si)
{
	int sig = (int)si->ssi_signo;
	if (sig == SIGWINCH && relay) {
		struct winsize ws;
		if (ioctl(tty_in ? 0 : tty_out, TIOCGWINSZ, &ws) == 0)
			ioctl(master, TIOCSWINSZ, &ws);
		return;
	}
	if (sig != SIGCHLD) {
		if (relay || si->ssi_code <= 0) /* SI_USER, SI_QUEUE, SI_TKILL: sent by a process */
			kill(child, sig);
		return;
	}
	int status;
	while (waitpid(child, &status, WNOHANG | WUNTRACED) == child) {
		if (!WIFSTOPPED(status))
			die_as(status);
		if (relay)
			restore();
		kill(getpid(), SIGSTOP);
		if (relay)
			raw_mode();
		kill(child, SIGCONT);
	}
}

/* flow moves what it can of p (dropping it without an output); it returns 0 once p's input or
 * output ended. */
static int flow(struct pipe *p, short in_ev, short out_ev)
{
	if (p->len == 0 && (in_ev & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t n = read(p->in, p->buf, sizeof p->buf);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return 0;
		p->len = n > 0 && p->out >= 0 ? n : 0, p->off = 0;
	}
	if (p->len > 0 && (out_ev & (POLLOUT | POLLERR | POLLHUP))) {
		ssize_t n = write(p->out, p->buf + p->off, (size_t)(p->len - p->off));
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return 0;
		if (n > 0 && (p->off += n) == p->len)
			p->len = 0;
	}
	return 1;
}

/* wait_child waits for the child to end, handling signals and, relaying, moving bytes. */
static void wait_child(int sigfd)
{
	up.in = 0, up.out = master, down.in = master, down.out = tty_out;
	int up_open = relay && tty_in, down_open = relay;
	if (relay) {
		fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
		raw_mode();
	}
	for (;;) {
		/* Each direction waits to read, or, with bytes held, to write. */
		struct pollfd fds[5] = {
			{sigfd, POLLIN, 0},
			{up_open && !up.len ? 0 : -1, POLLIN, 0},
			{up_open && up.len ? master : -1, POLLOUT, 0},
			{down_open && !down.len ? master : -1, POLLIN, 0},
			{down_open && down.len ? tty_out : -1, POLLOUT, 0},
		};
		if (poll(fds, 5, -1) < 0)
			continue; /* EINTR */
		if (fds[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sigfd, &si, sizeof si) == sizeof si)
				on_signal(&si);
		}
		if (up_open && !flow(&up, fds[1].revents, fds[2].revents))
			up_open = 0; /* the caller's input ended: the command may still write */
		if (down_open && !flow(&down, fds[3].revents, fds[4].revents))
			down_open = 0; /* every process of the node closed the pty */
	}
}

/* options reads -d, -u UID:GID and -w DIR from argv[2] on; it returns the index of "--",
 * or -1. */
static int options(int argc, char **argv)
{
	int i = 2;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		char *end;
		if (strcmp(argv[i], "-d") == 0) {
			detach = 1;
		} else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
			workdir = argv[++i];
		} else if (strcmp(argv[i], "-u") == 0 && i + 1 < argc) {
			run_uid = strtol(argv[++i], &end, 10);
			if (*end != ':' || run_uid < 0)
				return -1;
			run_gid = strtol(end + 1, &end, 10);
			if (*end != '\0' || run_gid < 0)
				return -1;
		} else {
			return -1;
		}
	}
	return i + 1 < argc ? i : -1;
}

int main(int argc, char **argv)
{
	char *end;
	long pidfd = argc > 3 ? strtol(argv[1], &end, 10) : -1;
	int dashes = pidfd >= 0 && *end == '\0' ? options(argc, argv) : -1;
	if (dashes < 0) {
		fprintf(stderr, "usage: %s PIDFD [-d] [-u UID:GID] [-w DIR] -- COMMAND [ARG...]\n", argv[0]);
		return 2;
	}
	/* Every signal but those of faults is read from a signalfd, from before the fork on. */
	sigset_t waited, mask;
	sigfillset(&waited);
	int faults[] = {SIGKILL, SIGSTOP, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
	for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
		sigdelset(&waited, faults[i]);
	sigprocmask(SIG_BLOCK, &waited, &mask);
	ctty = open("/dev/tty", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC); /* the host's */
	tty_in = isatty(0) && tcgetattr(0, &saved) == 0;
	tty_out = isatty(1) ? 1 : isatty(2) ? 2 : -1;
	relay = !detach && (tty_in || isatty(0) || tty_out >= 0);
	enter((int)pidfd);
	int slave = -1;
	if (relay && open_pty(&slave) != 0) {
		fprintf(stderr, "trellis: the node has no pseudo-terminal for the command (its /dev/ptmx: "
			"%s): run it without a terminal (standard input, output and error not one)\n", strerror(errno));
		return CANNOT_RUN;
	}
	int sigfd = signalfd(-1, &waited, SFD_CLOEXEC);
	if (sigfd < 0)
		die("signalfd");
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0)
		run(argv + dashes + 1, &mask, slave);
	close(slave);
	wait_child(sigfd);
	return NOT_FOUND;
}
