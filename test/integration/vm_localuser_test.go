//go:build integration

package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/vmsock"
	"golang.org/x/sys/unix"
)

// connectProbeEnv names, in the environment of the test binary run as a probe, the unix socket
// the probe connects to (runMain); tapProbeEnv the tap it attaches a queue to.
const (
	connectProbeEnv = "TRELLIS_IT_CONNECT"
	tapProbeEnv     = "TRELLIS_IT_TAP"
)

// connectProbe connects to the unix socket path (a leading @ names an abstract one) and, if a
// QEMU monitor answers, asks for the VM's status, printing what it says. It exits 0 if it
// connected, 1 if the connection was refused for permission (EACCES), 2 otherwise.
func connectProbe(path string) int {
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		fmt.Println("connect:", err)
		if errors.Is(err, syscall.EACCES) {
			return 1
		}
		return 2
	}
	defer conn.Close()
	fmt.Println("connected")
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(conn)
	greeting, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(greeting, "QMP") {
		return 0 // not a monitor (the agent, terminal and mirror ports speak only when spoken to)
	}
	io.WriteString(conn, `{"execute":"qmp_capabilities"}`+"\n"+`{"execute":"query-status"}`+"\n")
	for range 2 {
		line, err := rd.ReadString('\n')
		fmt.Print(line)
		if err != nil {
			break
		}
	}
	return 0
}

// tapProbe attaches a queue to multiqueue tap name through /dev/net/tun, open as its
// descriptor 3 (as a user may open it where the device is world-writable, Debian's default),
// which would give it a share of the VM's frames and let it send its own. It exits 0 if it
// attached, 1 if refused for permission (EPERM), 2 otherwise.
func tapProbe(name string) int {
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR | unix.IFF_MULTI_QUEUE)
		err = unix.IoctlIfreq(3, unix.TUNSETIFF, ifr)
	}
	fmt.Println("TUNSETIFF:", err)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, unix.EPERM):
		return 1
	}
	return 2
}

// localUserTopo is a VM beside a container; its port is a tap with two queues.
const localUserTopo = `name: vmuser
nodes:
  v:
    kind: vm
    vm: {queues: 2}
    addresses:
      eth1: [10.0.1.1/24]
  a:
    addresses:
      eth1: [10.0.1.2/24]
links:
  - endpoints: [v:eth1, a:eth1]
`

// TestVMLocalUser is the local unprivileged user's table for VM nodes (docs/security.md, "A
// local unprivileged user"): QEMU listens on no abstract socket (those have no permissions,
// and /proc/net/unix lists their names), a user (uid 65534) connecting to each of the VM's
// sockets is refused with EACCES (on main before the fix, it asked the monitor and got
// {"return": {"status": "running"}}), nor may it attach a queue to the VM's tap, QEMU runs
// under its seccomp sandbox as an unprivileged uid, and down leaves no socket directory behind.
func TestVMLocalUser(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatalf("QEMU is not installed (%v): this security test must run; install it with `apt-get install qemu-system-x86`", err)
	}
	e := start(t)
	path := writeTopo(t, localUserTopo)
	mustTrellis(t, e.state, "up", path)
	ping(t, e.state, "vmuser", "a", "10.0.1.1") // the VM works: its agent set it up
	pid := inspect(t, e.state, "vmuser").node(t, "v").PID
	socks := listeningUnix(t, pid)
	if len(socks) < 4 {
		t.Fatalf("QEMU (pid %d) listens on %d unix sockets %v, want its monitor, agent, terminal and mirror", pid, len(socks), socks)
	}
	probe := probeBinary(t)

	t.Run("no abstract socket", func(t *testing.T) {
		for _, s := range socks {
			if strings.HasPrefix(s, "@") {
				t.Errorf("QEMU listens on the abstract socket %s (no permissions; its name is in /proc/net/unix)", s)
			}
		}
	})
	t.Run("socket directory root only", func(t *testing.T) {
		for _, s := range socks {
			if strings.HasPrefix(s, "@") {
				continue
			}
			// The socket's directory, and each above it to vmsock.RunDir.
			for d := filepath.Dir(s); strings.HasPrefix(d, vmsock.RunDir); d = filepath.Dir(d) {
				fi, err := os.Lstat(d)
				if err != nil {
					t.Fatal(err)
				}
				if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || fi.Mode().Perm() != 0o700 || st.Uid != 0 {
					t.Errorf("%s (above QEMU's socket %s) has mode %v and owner %d, want a directory of mode 0700, root's", d, s, fi.Mode(), st.Uid)
				}
			}
		}
	})
	t.Run("connect as nobody", func(t *testing.T) {
		for _, s := range socks {
			out, code := runProbe(t, probe, s)
			if code != 1 {
				t.Errorf("as uid %d, connecting to QEMU's %s: exit %d, want 1 (EACCES); it said:\n%s", nobody, s, code, out)
			}
			if strings.Contains(out, `"status"`) {
				t.Errorf("as uid %d, QEMU's monitor %s answered query-status: %s", nobody, s, out)
			}
		}
	})
	t.Run("attach to the VM's tap as nobody", func(t *testing.T) {
		var port string
		for _, ep := range inspect(t, e.state, "vmuser").Links[0].Endpoints {
			if ep.Node == "v" {
				port = ep.Port
			}
		}
		if port == "" {
			t.Fatal("inspect shows no port of v")
		}
		tun, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer tun.Close()
		cmd := probeCmd(probe, tapProbeEnv+"="+port)
		cmd.ExtraFiles = []*os.File{tun}
		out, err := cmd.CombinedOutput()
		if code := exitCode(err); code != 1 {
			t.Errorf("as uid %d, attaching a queue to the VM's tap %s: exit %d (%v), want 1 (EPERM): %s", nobody, port, code, err, out)
		}
	})
	t.Run("sandbox and uid", func(t *testing.T) {
		status := procStatus(t, pid)
		if status["Seccomp"] != "2" {
			t.Errorf("QEMU runs with Seccomp: %q, want 2 (its -sandbox filter)", status["Seccomp"])
		}
		for _, f := range []string{"Uid", "Gid"} {
			if ids := strings.Fields(status[f]); len(ids) != 4 || slices.Contains(ids, "0") {
				t.Errorf("QEMU runs with %s: %s, want no root id (-runas)", f, status[f])
			}
		}
		if status["CapEff"] != "0000000000000000" || status["CapPrm"] != "0000000000000000" {
			t.Errorf("QEMU has capabilities: effective %s, permitted %s", status["CapEff"], status["CapPrm"])
		}
	})

	mustTrellis(t, e.state, "down", "vmuser")
	for _, s := range socks {
		if _, err := os.Stat(filepath.Dir(s)); !strings.HasPrefix(s, "@") && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after down, the directory of QEMU's socket %s is still there (%v)", s, err)
		}
	}
	e.assertClean()
}

// listeningUnix returns the paths of the listening unix sockets process pid holds (an
// abstract one with a leading @), from /proc/net/unix of the host's network namespace.
func listeningUnix(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			held[strings.TrimSuffix(inode, "]")] = true
		}
	}
	data, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n")[1:] {
		// Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is a listening socket.
		f := strings.Fields(line)
		if len(f) == 8 && held[f[6]] && f[3] == "00010000" {
			out = append(out, f[7])
		}
	}
	return out
}

// probeBinary copies the test binary where uid nobody may run it.
func probeBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "trellis-it-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "probe")
	if err := os.WriteFile(path, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// probeCmd runs the probe binary as uid nobody with the environment env.
func probeCmd(probe string, env ...string) *exec.Cmd {
	cmd := exec.Command(probe)
	cmd.Env, cmd.Dir = env, "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// runProbe runs connectProbe on socket as uid nobody and returns its output and exit code.
func runProbe(t *testing.T, probe, socket string) (string, int) {
	t.Helper()
	out, err := probeCmd(probe, connectProbeEnv+"="+socket).CombinedOutput()
	if code := exitCode(err); code >= 0 {
		return string(out), code
	}
	t.Fatalf("running the probe as uid %d: %v\n%s", nobody, err, out)
	return "", 0
}

// procStatus reads /proc/PID/status by field.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}
