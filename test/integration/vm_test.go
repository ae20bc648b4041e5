//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/trellisnet/trellis/internal/testkit"
)

// needQEMU skips a test of VM nodes on a machine without QEMU.
func needQEMU(t *testing.T) {
	t.Helper()
	testkit.RequireTool(t, "qemu-system-x86_64", "scripts/setup.sh installs qemu-system-x86")
}

// TestVMMixedOSPF brings up the vm-mixed example, two VM routers and two container routers
// running BIRD, and checks with the OSPF ring's check script that OSPF converges and every
// router reaches every loopback.
func TestVMMixedOSPF(t *testing.T) {
	needQEMU(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	registerNetwork("ospf-mixed")
	began := time.Now()
	mustTrellis(t, e.state, "up", filepath.Join(root, "examples/vm-mixed/mixed.yaml"))
	up := time.Since(began)
	check := exec.Command(filepath.Join(root, "examples/ospf-ring/check.sh"), trellisBin, e.state)
	check.Env = append(os.Environ(), "NET=ospf-mixed")
	out, err := check.CombinedOutput()
	if err != nil {
		t.Fatalf("check.sh: %v\n%s", err, out)
	}
	t.Logf("up in %.1fs, converged %.1fs after up began:\n%s", up.Seconds(), time.Since(began).Seconds(), strings.TrimSpace(string(out)))
	mustTrellis(t, e.state, "down", "ospf-mixed")
	e.assertClean()
}

// vmTopo is a VM v with a container a on a capped link, and with linkB a container b on a
// second link.
func vmTopo(linkB bool) string {
	vEth2, bEth1, link := "", "", ""
	if linkB {
		vEth2, bEth1 = "      eth2: [10.0.2.1/24]\n", "    addresses:\n      eth1: [10.0.2.2/24]\n"
		link = "  - endpoints: [v:eth2, b:eth1]\n"
	}
	return `name: vmnet
nodes:
  v:
    kind: vm
    addresses:
      lo: [10.255.0.9/32]
      eth1: [10.0.1.1/24, fd00:1::1/64]
` + vEth2 + `    sysctl:
      net.ipv4.ip_forward: "1"
    cpu: 2
    vm:
      pin: {io: [0]}
      priority: {io: 10}
      reserve: 90%
      queues: 2
      queue_size: 512
  a:
    addresses:
      eth1: [10.0.1.2/24, fd00:1::2/64]
  b:
` + bEth1 + `links:
  - endpoints: [v:eth1, a:eth1]
    rate: 10mbit
` + link
}

// TestVMNode checks a VM node beside containers: ARP, IPv6 ND and ping over a shortbridge, exec
// in the guest, the VM's knobs on QEMU's threads and its NICs, inspect, a rate cap, a link added
// live (hot-plugged), a link's MTU changed (the VM's NIC plugged anew), kill -9 of QEMU noticed
// and repaired by up, and down leaving nothing.
func TestVMNode(t *testing.T) {
	needQEMU(t)
	e := start(t)
	registerNetwork("vmnet")
	path := writeTopo(t, vmTopo(false))
	mustTrellis(t, e.state, "up", path)
	ping(t, e.state, "vmnet", "a", "10.0.1.1")
	ping(t, e.state, "vmnet", "a", "fd00:1::1")
	if out := mustExec(t, e.state, "vmnet", "a", "ip", "neigh", "show", "10.0.1.1"); !strings.Contains(out, "lladdr") {
		t.Errorf("a has no ARP entry for the VM: %q", out)
	}

	t.Run("exec", func(t *testing.T) {
		if got := strings.TrimSpace(mustExec(t, e.state, "vmnet", "v", "hostname")); got != "v" {
			t.Errorf("hostname in the guest = %q, want v", got)
		}
		if got := strings.TrimSpace(mustExec(t, e.state, "vmnet", "v", "cat", "/proc/sys/net/ipv4/ip_forward")); got != "1" {
			t.Errorf("ip_forward in the guest = %q, want the file's 1", got)
		}
		if _, _, err := execIn(t, e.state, "vmnet", "v", "sh", "-c", "exit 7"); exitCode(err) != 7 {
			t.Errorf("exit code through the guest agent = %d (%v), want 7", exitCode(err), err)
		}
		queues := mustExec(t, e.state, "vmnet", "v", "ls", "/sys/class/net/eth1/queues")
		if !strings.Contains(queues, "rx-1") {
			t.Errorf("the guest's eth1 has queues %q, want two queue pairs (vm.queues: 2)", queues)
		}
		if got := strings.TrimSpace(mustExec(t, e.state, "vmnet", "v", "nproc")); got != "2" {
			t.Errorf("the guest has %s CPUs, want the node's cpu: 2", got)
		}
		uname := mustExec(t, e.state, "vmnet", "v", "uname", "-r")
		if host, _ := os.ReadFile("/proc/sys/kernel/osrelease"); strings.TrimSpace(uname) == strings.TrimSpace(string(host)) {
			t.Errorf("the guest runs the host's kernel %s: not a VM", uname)
		}
	})

	t.Run("terminal", func(t *testing.T) { vmTerminal(t, e.state) })
	t.Run("web terminal", func(t *testing.T) {
		s := startServe(t, e.state)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := s.wsDial(ctx, "/networks/vmnet/nodes/v/terminal?"+url.Values{"cmd": {"sh", "-c", "stty size; hostname; exit 4"}, "cols": {"90"}, "rows": {"20"}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		out, code, err := terminalRun(ctx, c)
		if err != nil || code != 4 || !strings.Contains(out, "20 90") || !strings.Contains(out, "v\r\n") {
			t.Errorf("terminal websocket into the VM: %v, exit %d, output %q; want exit 4, 20 90 and the hostname v", err, code, out)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		out := mustTrellis(t, e.state, "inspect", "vmnet", "--json")
		var info struct {
			Nodes []struct {
				Name       string
				Kind       string
				PID        int
				Interfaces []struct{ Name string }
				Threads    []struct {
					Name, Affinity, Policy, Reserve string
					TID, Priority                   int
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatal(err)
		}
		for _, n := range info.Nodes {
			if n.Name != "v" {
				continue
			}
			var names []string
			for _, i := range n.Interfaces {
				names = append(names, i.Name)
			}
			if n.Kind != "vm" || !strings.Contains(strings.Join(names, " "), "eth1") {
				t.Errorf("inspect of the VM: kind %q, interfaces %v", n.Kind, names)
			}
			vcpus, io := 0, 0
			for _, th := range n.Threads {
				switch {
				case strings.HasPrefix(th.Name, "CPU "):
					vcpus++
					if th.Policy != "deadline" || th.Reserve != "9ms/10ms" {
						t.Errorf("vCPU thread %+v: want the reservation deadline 9ms/10ms", th)
					}
				// QEMU's main loop (its first thread), and its I/O threads; helper threads made
				// before QEMU names its threads (RCU's) bear its name too.
				case th.TID == n.PID || strings.HasPrefix(th.Name, "IO "):
					io++
					if th.Affinity != "0" || th.Policy != "fifo" || th.Priority != 10 {
						t.Errorf("I/O thread %+v: want pinned to CPU 0, fifo, priority 10", th)
					}
				}
			}
			if vcpus != 2 || io == 0 {
				t.Errorf("inspect shows %d vCPU threads (want 2) and %d I/O threads: %+v", vcpus, io, n.Threads)
			}
		}
	})

	t.Run("rate", func(t *testing.T) {
		got := iperfRate(t, e.state, "vmnet", "v", "a", "10.0.1.1") / 10e6
		t.Logf("a -> VM over a 10mbit link: %.2f of the rate", got)
		if got > 1.1 || got < 0.5 {
			t.Errorf("a -> VM: %.2f of the 10mbit rate, want at most 1.1 (and at least 0.5 even under emulation)", got)
		}
	})

	t.Run("link added live", func(t *testing.T) {
		pid := vmPID(t, e.state)
		rewriteTopo(t, path, vmTopo(true))
		mustTrellis(t, e.state, "up", path)
		ping(t, e.state, "vmnet", "b", "10.0.2.1")
		if got := vmPID(t, e.state); got != pid {
			t.Errorf("adding a link restarted the VM (pid %d -> %d)", pid, got)
		}
	})

	t.Run("mtu", func(t *testing.T) { vmMTU(t, e.state, path) })

	t.Run("kill -9", func(t *testing.T) {
		if err := syscall.Kill(vmPID(t, e.state), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(mustTrellis(t, e.state, "ls"), "1 not running") {
			if time.Now().After(deadline) {
				t.Fatalf("trellis ls does not show the killed VM:\n%s", mustTrellis(t, e.state, "ls"))
			}
			time.Sleep(100 * time.Millisecond)
		}
		out := mustTrellis(t, e.state, "up", path)
		if !strings.Contains(out, "node v (restarts)") {
			t.Errorf("up after kill -9 of QEMU did not restart v:\n%s", out)
		}
		ping(t, e.state, "vmnet", "a", "10.0.1.1")
		ping(t, e.state, "vmnet", "b", "10.0.2.1")
	})

	mustTrellis(t, e.state, "down", "vmnet")
	e.assertClean()
}

func vmPID(t *testing.T, state string) int {
	t.Helper()
	pid := inspect(t, state, "vmnet").node(t, "v").PID
	if pid == 0 {
		t.Fatal("the VM is not running")
	}
	return pid
}

// vmTerminal runs trellis exec with a terminal into the VM: a shell on a terminal in the guest
// that follows the caller's size, and the shell's exit code.
func vmTerminal(t *testing.T, state string) {
	cmd := exec.Command(trellisBin, "--state-dir", state, "exec", "vmnet", "v")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	out := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				out <- string(buf[:n])
			}
			if err != nil {
				close(out)
				return
			}
		}
	}()
	var seen strings.Builder
	expect := func(want string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for !strings.Contains(seen.String(), want) {
			select {
			case s, ok := <-out:
				if !ok {
					t.Fatalf("the terminal closed before %q; it showed:\n%s", want, seen.String())
				}
				seen.WriteString(s)
			case <-deadline:
				t.Fatalf("no %q on the terminal in 30 s; it showed:\n%s", want, seen.String())
			}
		}
	}
	ptmx.WriteString("echo hi-$((1+2)); stty size\n")
	expect("hi-3")
	expect("30 100")
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // SIGWINCH, then the resize frame
	ptmx.WriteString("stty size\n")
	expect("40 120")
	ptmx.WriteString("exit 5\n")
	if err := cmd.Wait(); exitCode(err) != 5 {
		t.Errorf("trellis exec with a terminal: %v, want the shell's exit code 5", err)
	}
}

// iperfRate starts an iperf3 server in node server (slow to listen in a VM under emulation),
// runs a 3-second TCP client in node client against addr, trying again while the connection
// is refused, and returns the rate received, in bits per second.
func iperfRate(t *testing.T, state, network, server, client, addr string) float64 {
	t.Helper()
	mustExec(t, state, network, server, "sh", "-c", "iperf3 -s -D -1 >/dev/null 2>&1")
	for attempt := 0; ; attempt++ {
		out, errOut, err := execIn(t, state, network, client, "iperf3", "-c", addr, "-t", "3", "-J")
		var res iperfResult
		jerr := json.Unmarshal([]byte(out), &res)
		if err == nil && jerr == nil && res.Error == "" {
			return res.End.SumReceived.BitsPerSecond
		}
		if attempt == 50 || !strings.Contains(res.Error+errOut, "refused") {
			t.Fatalf("iperf3 client in %s: %v (%s)\n%s\n%s", client, err, res.Error, out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
