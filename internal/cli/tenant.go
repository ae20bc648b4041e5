package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/pki"
	"github.com/trellisnet/trellis/internal/spec"
	"gopkg.in/yaml.v3"
)

// tenantCmd is `trellis tenant add|ls|quota|rm`, for the cluster's administrator.
func tenantCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Manage a cluster's tenants: etcd users confined to their own networks, with quotas (administrator)",
		Long: `Manage the tenants of a cluster (docs/cluster.md, "Tenants"), with the administrator's context
file (--cluster, whose certificate is etcd's root user's). A tenant is a role that grants only
its own networks, a client certificate (common name tenant:NAME:ID, an etcd user of that role)
whose fingerprint its record keeps, and a quota (nodes, cpus, memory, pids; and the grants
realtime and pin, refused without them) that up keeps in its transaction. Removing a tenant
revokes its certificate: etcd, the agents and the API refuse it, also after a tenant of the
same name is added again. The names default and root are reserved. The first tenant turns
etcd's authentication on.`,
	}
	cmd.AddCommand(tenantAddCmd(), tenantLsCmd(), tenantQuotaCmd(), tenantRmCmd())
	return cmd
}

// quotaFlags are the flags of a quota.
type quotaFlags struct {
	nodes         int
	cpus          float64
	memory        string
	pids          int64
	realtime, pin bool
}

func (f *quotaFlags) add(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.nodes, "nodes", 0, "most nodes of all the tenant's networks together (0: not limited)")
	cmd.Flags().Float64Var(&f.cpus, "cpus", 0, "most cpu cores (the nodes' cpu:) together (0: not limited)")
	cmd.Flags().StringVar(&f.memory, "memory", "", "most memory (the nodes' memory:, or their default limit) together, e.g. 16G (default: not limited)")
	cmd.Flags().Int64Var(&f.pids, "pids", 0, "most processes (the nodes' pids:, or their default 1024) together (0: not limited)")
	cmd.Flags().BoolVar(&f.realtime, "realtime", false, "grant real-time scheduling: VMs' priority and reserve (default: refused)")
	cmd.Flags().BoolVar(&f.pin, "pin", false, "grant naming cores: VMs' pin, nodes' cpuset, engines' cpus as CPU numbers (default: refused)")
}

func (f *quotaFlags) quota() (cluster.Quota, error) {
	q := cluster.Quota{Nodes: f.nodes, CPUs: f.cpus, Pids: f.pids, Realtime: f.realtime, Pin: f.pin}
	if f.nodes < 0 || f.cpus < 0 || f.pids < 0 {
		return q, fmt.Errorf("--nodes %d, --cpus %g, --pids %d: give positive figures (0: not limited)", f.nodes, f.cpus, f.pids)
	}
	if f.memory != "" {
		m, err := spec.ParseMemory(f.memory)
		if err != nil {
			return q, fmt.Errorf("--memory %q: %v; write e.g. 16G or 512M", f.memory, err)
		}
		q.Memory = m
	}
	return q, nil
}

// adminSession is the cluster of the administrator's context file, which tenant commands need.
func adminSession(cmd *cobra.Command) (*clusterSession, *cluster.Context, error) {
	path, _ := cmd.Flags().GetString(clusterFlag)
	if path == "" {
		return nil, nil, fmt.Errorf("%s needs --cluster FILE: the administrator's context file (its certificate is etcd's root user's)", cmd.CommandPath())
	}
	cc, err := cluster.LoadContext(path)
	if err != nil {
		return nil, nil, err
	}
	cs, err := clusterOf(cmd)
	return cs, cc, err
}

func tenantAddCmd() *cobra.Command {
	var (
		qf            quotaFlags
		caKey, outDir string
		valid         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "add NAME --ca-key CA.key [--nodes N] [--cpus C] [--memory SIZE] [--pids N] [--realtime] [--pin] [--out DIR]",
		Short: "Add a tenant: its etcd user and role, its client certificate and context file, its quota",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			q, err := qf.quota()
			if err != nil {
				return err
			}
			cs, cc, err := adminSession(cmd)
			if err != nil {
				return err
			}
			defer cs.store.Close()
			if caKey == "" {
				return errors.New("--ca-key: give the key of the CA that signed etcd's certificates (" + cc.CACert + "), to issue the tenant's")
			}
			ca, err := pki.LoadCA(cc.CACert, caKey)
			if err != nil {
				return err
			}
			pair, err := cs.store.AddTenant(cmd.Context(), &cluster.Tenant{Name: name, Quota: q}, ca, valid)
			if err != nil {
				return err
			}
			ctxFile, err := writeTenantContext(outDir, name, cc, ca, pair)
			if err != nil {
				return fmt.Errorf("tenant %s was added, but writing its files failed (trellis tenant rm %s, then add again): %w", name, name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tenant %s added (quota: %s); its context file: %s (certificate valid until %s)\n",
				name, q, ctxFile, time.Now().Add(valid).UTC().Format(time.DateOnly))
			return nil
		},
	}
	qf.add(cmd)
	cmd.Flags().StringVar(&caKey, "ca-key", "", "key (PEM) of the CA of the context file's cacert, to sign the tenant's certificate")
	cmd.Flags().StringVar(&outDir, "out", ".", "directory for NAME.crt, NAME.key, ca.crt and NAME.yaml, the tenant's context file")
	cmd.Flags().DurationVar(&valid, "valid", 365*24*time.Hour, "how long the tenant's certificate is valid")
	return cmd
}

// writeTenantContext writes a tenant's certificate, key, the CA's certificate and its context
// file into dir, and returns the context file's path.
func writeTenantContext(dir, name string, admin *cluster.Context, ca *pki.CA, pair *pki.Pair) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if _, _, err := pair.Write(dir, name); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.PEM, 0o644); err != nil {
		return "", err
	}
	data, err := yaml.Marshal(&cluster.Context{Etcd: admin.Etcd, CACert: "ca.crt", Cert: name + ".crt", Key: name + ".key", Tenant: name})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".yaml")
	return path, os.WriteFile(path, data, 0o600)
}

func tenantLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the tenants, their quotas and what their networks take",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, _, err := adminSession(cmd)
			if err != nil {
				return err
			}
			defer cs.store.Close()
			ctx := cmd.Context()
			ts, err := cs.store.Tenants(ctx)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TENANT\tNETWORKS\tUSE\tQUOTA")
			for _, t := range ts {
				nets, _, err := cs.store.Networks(ctx, t.Name)
				if err != nil {
					return err
				}
				use, _, err := cs.store.Usage(ctx, t.Name, "")
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", t.Name, len(nets), use, t.Quota)
			}
			return w.Flush()
		},
	}
}

func tenantQuotaCmd() *cobra.Command {
	var qf quotaFlags
	cmd := &cobra.Command{
		Use:   "quota NAME [--nodes N] [--cpus C] [--memory SIZE] [--pids N] [--realtime] [--pin]",
		Short: "Set a tenant's quota (flags not given: not limited, not granted); networks already up stay",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := qf.quota()
			if err != nil {
				return err
			}
			cs, _, err := adminSession(cmd)
			if err != nil {
				return err
			}
			defer cs.store.Close()
			if err := cs.store.SetQuota(cmd.Context(), args[0], q); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tenant %s: quota %s\n", args[0], q)
			return nil
		},
	}
	qf.add(cmd)
	return cmd
}

func tenantRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a tenant that has no networks: its etcd user, role and quota (its certificate is refused from then on)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, _, err := adminSession(cmd)
			if err != nil {
				return err
			}
			defer cs.store.Close()
			if err := cs.store.RemoveTenant(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tenant %s removed\n", args[0])
			return nil
		},
	}
}
