package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/substrate"
)

// chainTopology is a chain of n >= 2 nodes, each joined to the next by a point-to-point link with an
// address at each end: what `trellis up` of such a file makes.
func chainTopology(name string, n int) []byte { return ratedChain(name, n, -1, 0) }

// ratedChain is chainTopology with a rate of mbit Mbit/s on link rated (the link from node
// rated to the next; none if mbit is 0).
func ratedChain(name string, n, rated, mbit int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nnodes:\n", name)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  n%d:\n    addresses:\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "      eth1: [%s/30]\n", chainAddr(i-1, 2))
		}
		if i < n-1 {
			fmt.Fprintf(&b, "      eth2: [%s/30]\n", chainAddr(i, 1))
		}
	}
	b.WriteString("links:\n")
	for i := 0; i+1 < n; i++ {
		fmt.Fprintf(&b, "  - endpoints: [n%d:eth2, n%d:eth1]\n", i, i+1)
		if i == rated && mbit > 0 {
			fmt.Fprintf(&b, "    rate: %dmbit\n", mbit)
		}
	}
	return []byte(b.String())
}

// chainAddr is host h (1 or 2) of link i's /30.
func chainAddr(i, h int) string {
	v := i * 4
	return fmt.Sprintf("10.%d.%d.%d", v>>16&255, v>>8&255, v&255+h)
}

// mininetChain times Mininet making and removing the same chain: n hosts (network namespaces
// with a shell each, Mininet's nodes) joined by veth links, with Linux bridge switches
// configured and no controller (the chain needs no switch). It prints the seconds of up and down.
const mininetChain = `import sys, time
from mininet.net import Mininet
from mininet.nodelib import LinuxBridge
from mininet.log import setLogLevel
setLogLevel('error')
n = int(sys.argv[1])
t0 = time.time()
net = Mininet(controller=None, switch=LinuxBridge, build=False)
hosts = [net.addHost('h%d' % i) for i in range(n)]
for i in range(n - 1):
    net.addLink(hosts[i], hosts[i + 1])
net.build()
net.start()
t1 = time.time()
net.stop()
t2 = time.time()
print("%.6f %.6f" % (t1 - t0, t2 - t1))
`

// deploy times `up` and `down` of chains of nodes through the substrate, as `trellis up` and
// `trellis down` do them (without the process start of the CLI), and Mininet on the same chains.
func (r *runner) deploy() error {
	st, err := r.h.Store()
	if err != nil {
		return err
	}
	python := mininetPython()
	if r.opt.Mininet && python == "" {
		r.note("Mininet is not installed (apt-get install mininet): not compared")
	}
	script := filepath.Join(r.h.Work, "mininet_chain.py")
	if err := os.WriteFile(script, []byte(mininetChain), 0o644); err != nil {
		return err
	}
	for _, n := range r.opt.Chains {
		name := fmt.Sprintf("bench-chain-%d", n)
		net, err := spec.Parse(name+".yaml", chainTopology(name, n))
		if err != nil {
			return err
		}
		reps := r.opt.Repeat
		var ups, downs, mups, mdowns []float64
		var mem *result.NodeMemory
		for rep := 0; rep < reps; rep++ {
			before, err := machineUsed()
			if err != nil {
				return err
			}
			t0 := time.Now()
			_, err = substrate.Up(context.Background(), st, net, "", "(trellis-bench)", r.opt.Substrate)
			up := time.Since(t0).Seconds()
			if err != nil {
				setup.DownQuiet(st, name)
				return fmt.Errorf("chain of %d: %w", n, err)
			}
			if mem, err = idleMemory(st, name, before); err != nil {
				r.note("chain of %d: idle node memory not measured: %v", n, err)
			}
			t0 = time.Now()
			if err := substrate.Down(st, name); err != nil {
				return fmt.Errorf("chain of %d: %w", n, err)
			}
			down := time.Since(t0).Seconds()
			ups, downs = append(ups, up), append(downs, down)
			if r.opt.Mininet && python != "" {
				mu, md, err := runMininet(python, script, n)
				if err != nil {
					r.note("Mininet failed on a chain of %d: %v", n, err)
				} else {
					mups, mdowns = append(mups, mu), append(mdowns, md)
				}
			}
		}
		res := &result.DeployResult{Tool: "trellis", Nodes: n, Up: result.StatOf(ups), Down: result.StatOf(downs), Memory: mem}
		r.rep.Deploy = append(r.rep.Deploy, res)
		r.logf("   trellis %5d nodes: up %.2fs, down %.2fs\n", n, res.Up.Median, res.Down.Median)
		if mem != nil {
			r.logf("   trellis %5d nodes: an idle node uses %d KiB of the machine: init %d KiB (%.1f threads), kernel %d KiB (slab %d KiB)\n",
				n, mem.Machine>>10, mem.Init>>10, mem.Threads, mem.Kernel>>10, mem.Slab>>10)
		}
		if len(mups) > 0 {
			m := &result.DeployResult{Tool: "mininet", Nodes: n, Up: result.StatOf(mups), Down: result.StatOf(mdowns)}
			r.rep.Deploy = append(r.rep.Deploy, m)
			r.logf("   mininet %5d nodes: up %.2fs, down %.2fs\n", n, m.Up.Median, m.Down.Median)
		}
	}
	return nil
}

// mininetPython returns a Python interpreter that imports mininet, or "".
func mininetPython() string {
	if _, err := exec.LookPath("mn"); err != nil {
		return ""
	}
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import mininet.net").Run() == nil {
			return py
		}
	}
	return ""
}

func runMininet(python, script string, n int) (up, down float64, err error) {
	cmd := exec.Command(python, script, strconv.Itoa(n))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("%v: %s", err, tailLines(string(out), 5))
	}
	f := strings.Fields(tailLines(string(out), 1))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("unexpected output: %q", tailLines(string(out), 5))
	}
	up, err1 := strconv.ParseFloat(f[0], 64)
	down, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("unexpected output: %q", out)
	}
	return up, down, nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
