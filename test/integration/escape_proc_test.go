//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const execEscapeTopo = `name: %s
nodes:
  a: {addresses: {eth1: [10.0.0.1/24]}}
  b: {addresses: {eth1: [10.0.0.2/24]}}
links:
  - endpoints: [a:eth1, b:eth1]
`

// TestEscapeExec: a node's root prepares its node for the next `trellis exec` (the user's, the
// API's, the web terminal's, an `exec:` line's), which must still run the command asked for,
// in that node, with nothing of the host's open: a program planted at /proc/1/exe under a /proc
// of its own does not run (on b3b80eb it ran with its working directory on the host's /, read
// a file of the host's /tmp and wrote one there), a process that takes another node's init's
// command line does not pass for it, and the command cannot push input into the caller's
// terminal (testTIOCSTI).
func TestEscapeExec(t *testing.T) {
	e := start(t)
	net := "escexec"
	mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(execEscapeTopo, net)))
	n := nonce()
	secret, marker := "/tmp/trellis-exec-secret-"+n, "/tmp/trellis-exec-marker-"+n
	if err := os.WriteFile(secret, []byte("host secret "+n+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(secret); os.Remove(marker) })

	// The command's working directory is the node's root: its /tmp is the node's.
	mustExec(t, e.state, net, "a", "sh", "-c", "echo x > /tmp/node-"+n)
	out := mustExec(t, e.state, net, "a", "sh", "-c", "pwd; ls /proc/self/cwd/ /proc/self/cwd/tmp/")
	if !strings.HasPrefix(out, "/\n") || !strings.Contains(out, "node-"+n) || strings.Contains(out, filepath.Base(secret)) {
		t.Errorf("pwd; ls /proc/self/cwd/ /proc/self/cwd/tmp/ in node a: want the node's root and /tmp:\n%s", out)
	}

	t.Run("a process that takes node b's init's command line", func(t *testing.T) {
		marker := strings.Split(strings.TrimRight(mustExec(t, e.state, net, "a", "cat", "/proc/1/cmdline"), "\x00"), "\x00")
		if len(marker) != 5 {
			t.Fatalf("node a's init's command line: %q", marker)
		}
		fake := fmt.Sprintf("(unshare -pf bash -c 'exec -a %s yes %s %s b fake' | sleep 300) >/dev/null 2>&1 &", marker[0], marker[1], marker[2])
		mustExec(t, e.state, net, "a", "sh", "-c", fake)
		want := strings.Join(append(marker[:3:3], "b", "fake"), "\x00") + "\x00"
		if !eventually(5*time.Second, func() bool { return hostHasCmdline(want) }) {
			t.Fatal("the fake init did not start")
		}
		for _, node := range []string{"a", "b"} {
			if got := strings.TrimSpace(mustExec(t, e.state, net, node, "cat", "/etc/hostname")); got != node {
				t.Errorf("trellis exec %s %s ran in node %s", net, node, got)
			}
		}
	})

	t.Run("push input into the caller's terminal", func(t *testing.T) { testTIOCSTI(t, e.state, net) })

	// Node a mounts a /proc of its own and plants /proc/1/exe: a script that would read the
	// host's secret and write the marker through its working directory, then run the command.
	script := fmt.Sprintf(`#!/bin/sh\necho ran > /run/planted\necho ran > tmp/%s\ncat tmp/%s > /run/leak\nshift 2\nexec "$@"\n`, filepath.Base(marker), filepath.Base(secret))
	mustExec(t, e.state, net, "a", "sh", "-c", fmt.Sprintf("mount -t tmpfs none /proc && mkdir /proc/1 && printf '%s' > /proc/1/exe && chmod 755 /proc/1/exe", script))
	if got := strings.TrimSpace(mustExec(t, e.state, net, "a", "cat", "/etc/hostname")); got != "a" {
		t.Errorf("trellis exec after /proc/1/exe was planted: %q, want the node's hostname", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the program planted at /proc/1/exe wrote %s on the host", marker)
	}
	if out, _, err := execIn(t, e.state, net, "a", "sh", "-c", "cat /run/planted /run/leak"); err == nil || out != "" {
		t.Errorf("the program planted at /proc/1/exe ran: %q", out)
	}
	mustTrellis(t, e.state, "down", net)
	e.assertClean()
}

// testTIOCSTI runs `trellis exec` from a shell on a terminal (script(1)), once with the
// terminal as its output and once with a file: the command in the node says whether its
// terminals are the caller's (a process it leaves running could read what the user types
// next) and pushes a line into every terminal it has (TIOCSTI); the shell then reads what is
// waiting on its terminal. On b3b80eb the node's command had the caller's terminal, as its
// controlling terminal, and the shell read the line: a node's root could type commands into
// the user's shell.
func testTIOCSTI(t *testing.T, state, net string) {
	scriptTool, err := exec.LookPath("script")
	if err != nil {
		t.Fatalf("script(1) runs trellis exec on a terminal: install bsdutils (scripts/setup.sh): %v", err)
	}
	line := "echo injected-" + nonce()
	var hostPTS syscall.Stat_t // script(1) makes its terminal there
	if err := syscall.Stat("/dev/pts", &hostPTS); err != nil {
		t.Fatal(err)
	}
	inject := fmt.Sprintf(`import fcntl, os, termios
for fd in (0, 1, 2):
    if os.isatty(fd):
        print("fd", fd, "is a caller terminal" if os.fstat(fd).st_dev == %d else "is a node terminal")
for name in ("/dev/tty", 0, 1, 2):
    try:
        fd = os.open(name, os.O_RDWR) if isinstance(name, str) else name
        for c in b"%s\n":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
        print(name, "pushed")
    except OSError as e:
        print(name, e)`, hostPTS.Dev, line)
	for _, output := range []string{"", " > $OUT; cat $OUT"} {
		sh := filepath.Join(t.TempDir(), "probe.sh")
		body := fmt.Sprintf("OUT=%s.out\n%s --state-dir %s exec %s a -- python3 -c '%s'%s\nread -t 2 got; echo \"tty: [$got]\"\n", sh, trellisBin, state, net, inject, output)
		if err := os.WriteFile(sh, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		// The terminal's input stays open (sleep) while the shell reads it.
		out, err := exec.Command("sh", "-c", fmt.Sprintf("sleep 6 | %s -qec 'bash \"%s\"' /dev/null", scriptTool, sh)).CombinedOutput()
		text := strings.ReplaceAll(string(out), "\r", "")
		if err != nil || !strings.Contains(text, "/dev/tty ") || !strings.Contains(text, "tty: []") || strings.Contains(text, "a caller terminal") {
			t.Errorf("trellis exec on a terminal (output%q): %v; the node's command had the caller's terminal, or pushed input into it:\n%s", output, err, text)
		}
	}
}

// hostHasCmdline tells whether a process of the host has the command line want (NUL-separated).
func hostHasCmdline(want string) bool {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil && string(data) == want {
			return true
		}
	}
	return false
}

// TestEscapeSysctl: trellis writes a node's net.* sysctls when it (re)configures an interface
// (accept_dad at least). Node a's root binds a host-wide setting (kernel.printk_ratelimit) over
// its /proc's file of one of them, then the network is changed: the host's setting must not
// change. On b3b80eb the write went through the node's /proc and set the host's to 0.
func TestEscapeSysctl(t *testing.T) {
	const target = "/proc/sys/kernel/printk_ratelimit"
	before := readTrim(target)
	if before == "0" {
		t.Fatalf("the host's %s is 0: the test cannot tell a write of 0 into it", target)
	}
	t.Cleanup(func() { os.WriteFile(target, []byte(before), 0) })
	e := start(t)
	net := "escsysctl"
	topo := writeTopo(t, fmt.Sprintf(execEscapeTopo, net))
	mustTrellis(t, e.state, "up", topo)
	// -R: /proc/sys holds the mask over /proc/sys/kernel/sysrq where the kernel has it (Debian's).
	mustExec(t, e.state, net, "a", "sh", "-c", "umount /proc/sys/net && umount -R /proc/sys && mount --bind "+target+" /proc/sys/net/ipv6/conf/eth1/accept_dad")
	rewriteTopo(t, topo, strings.Replace(fmt.Sprintf(execEscapeTopo, net), "[10.0.0.1/24]", "[10.0.0.1/24, 10.0.0.11/24]", 1))
	mustTrellis(t, e.state, "up", topo)
	if got := mustExec(t, e.state, net, "a", "ip", "-br", "addr", "show", "eth1"); !strings.Contains(got, "10.0.0.11/24") {
		t.Errorf("node a's eth1 was not reconfigured: %s", got)
	}
	if got := readTrim(target); got != before {
		t.Errorf("the host's %s changed from %s to %s: a node's sysctl was written through the node's /proc", target, before, got)
	}
	mustTrellis(t, e.state, "down", net)
	e.assertClean()
}
