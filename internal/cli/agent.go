package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/pki"
	"github.com/trellisnet/trellis/internal/placer"
	"github.com/trellisnet/trellis/internal/spec"
)

func agentCmd(store storeFunc, mo *machineOptions) *cobra.Command {
	var (
		cf           clusterFlags
		m            cluster.Machine
		address      string
		memory, rate string
		ttl          time.Duration
		withPlacer   bool
		listen       string
		counters     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "agent --etcd URLS --machine NAME --cacert CA --cert CERT --key KEY",
		Short: "Run this machine's part of a cluster: register it in etcd and converge it to its placements",
		Long: `Run this machine's part of a trellis cluster (docs/cluster.md). The agent registers the machine
in etcd with its capacity (cores, memory, underlay address and MTU, NIC rate: detected, or given
by the flags) under a lease it keeps alive, watches the placements that put nodes on this
machine, and converges the machine to each with the same reconciler as ` + "`trellis up`" + `. It
reports each network's status in etcd. Started again, it adopts what runs without restarting it;
while etcd cannot be reached it changes nothing, so the networks keep forwarding, and it catches
up when etcd is back. If the agent is not back within the lease (--lease), the machine counts as
lost and its nodes are placed on other machines. Its reports carry the networks' port counters
(--counters). It serves exec and link to the networks' tenants over mutual TLS (--listen): the
caller's tenant is its certificate's common name, and it acts only on that tenant's networks,
for the certificate the tenant's record holds (a removed tenant's is refused). --cert is the
machine's own, from trellis machine add NAME (common name agent:NAME): it may write only this
machine's registration and reports.

Runs in the foreground until SIGINT or SIGTERM; deploy/trellis-agent.service runs it under systemd.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if m.Name == "" {
				return errors.New("--machine: give this machine's name in the cluster")
			}
			if err := parseCapacity(&m, address, memory, rate); err != nil {
				return err
			}
			if err := checkAgentCert(cf.cert, m.Name); err != nil {
				return err
			}
			sub, err := mo.substrate()
			if err != nil {
				return err
			}
			if err := agent.Detect(&m); err != nil {
				return err
			}
			st, err := store()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, err := cf.dial(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			host, _ := os.Hostname()
			m.Agent = fmt.Sprintf("pid %d on %s", os.Getpid(), host)
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			l, err := listenEndpoint(&m, listen, cf)
			if err != nil {
				return err
			}
			if withPlacer {
				done := make(chan struct{})
				go func() {
					placer.Run(ctx, placer.Config{Store: s, ID: fmt.Sprintf("%s/%d", m.Name, os.Getpid()), Log: log, SessionTTL: ttl})
					close(done)
				}()
				defer func() { <-done }()
			}
			return agent.Run(ctx, agent.Config{Store: s, Machine: m, State: st, LeaseTTL: ttl, Log: log, Listener: l, CountersEvery: counters, Substrate: sub})
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&m.Name, "machine", "", "this machine's name in the cluster (letters, digits, - and _)")
	cmd.Flags().StringVar(&address, "address", "", "underlay IPv4 address other machines reach this one at (default: detected)")
	cmd.Flags().IntVar(&m.MTU, "mtu", 0, "underlay MTU (default: the underlay interface's)")
	cmd.Flags().Float64Var(&m.Cores, "cores", 0, "cores offered to nodes (default: all)")
	cmd.Flags().StringVar(&memory, "memory", "", "memory offered to nodes, e.g. 16G (default: all)")
	cmd.Flags().StringVar(&rate, "rate", "", "NIC rate, e.g. 10gbit (default: the interface's speed, else not limited)")
	cmd.Flags().DurationVar(&ttl, "lease", agent.DefaultLeaseTTL, "how long the machine stays registered without its agent (with --placer, also the placer's election lease)")
	cmd.Flags().StringVar(&listen, "listen", ":7445", "address of the agent's endpoint for exec and link (HTTPS, mutual TLS: --cert must be a server certificate too, naming the underlay address); \"\" for none")
	cmd.Flags().DurationVar(&counters, "counters", 10*time.Second, "how often to report the networks' port counters in etcd (written only when they changed; 0: never)")
	cmd.Flags().BoolVar(&withPlacer, "placer", false, "also run a placer in this process (one leader among all placers; see trellis placer): the certificate needs the placers' role, trellis machine add --placer")
	return cmd
}

// listenEndpoint opens the agent's endpoint for exec and link on addr ("" for none), with TLS
// that requires a client certificate of the cluster's CA, and sets m.Endpoint to its URL on the
// underlay address.
func listenEndpoint(m *cluster.Machine, addr string, cf clusterFlags) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	tc, err := pki.Files{CA: cf.ca, Cert: cf.cert, Key: cf.key}.ServerConfig()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w; give a free address, or \"\" for no endpoint", addr, err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	m.Endpoint = "https://" + net.JoinHostPort(m.Address.String(), port)
	return tls.NewListener(l, tc), nil
}

// checkAgentCert refuses a certificate that is not machine's agent's (agent:MACHINE, from
// trellis machine add) nor the administrator's: etcd would refuse its writes one by one.
func checkAgentCert(path, machine string) error {
	cn, err := commonName(path)
	if err != nil {
		return nil // the dial names the file and what is wrong with it
	}
	id := cluster.ParseIdentity(cn)
	if (id.Kind == cluster.KindAgent && id.Name == machine) || id.Kind == cluster.KindAdmin {
		return nil
	}
	return fmt.Errorf("--cert %s is the certificate of %s, not of machine %s's agent (%s): trellis machine add %s issues that one",
		path, cn, machine, cluster.AgentUser(machine), machine)
}

// parseCapacity reads the flags that need parsing into m.
func parseCapacity(m *cluster.Machine, address, memory, rate string) error {
	if address != "" {
		a, err := netip.ParseAddr(address)
		if err != nil || !a.Is4() {
			return fmt.Errorf("--address %q: give an IPv4 address, e.g. 198.18.0.1", address)
		}
		m.Address = a
	}
	if memory != "" {
		v, err := spec.ParseMemory(memory)
		if err != nil {
			return fmt.Errorf("--memory %q: %v; write e.g. 16G or 512M", memory, err)
		}
		m.Memory = v
	}
	if rate != "" {
		v, err := spec.ParseRate(rate)
		if err != nil {
			return fmt.Errorf("--rate %q: %v; write e.g. 10gbit", rate, err)
		}
		m.Rate = v
	}
	return nil
}
