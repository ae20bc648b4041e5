package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/trellisnet/trellis/internal/cluster/pki"
	"gopkg.in/yaml.v3"
)

// DefaultTenant is the tenant of a context file that names none.
const DefaultTenant = "default"

// Context is a context file (~/.config/trellis/cluster.yaml): which cluster the CLI talks to,
// with which certificate, as which tenant.
type Context struct {
	Etcd   []string `yaml:"etcd"`   // client URLs
	CACert string   `yaml:"cacert"` // paths; relative ones are relative to the file
	Cert   string   `yaml:"cert"`
	Key    string   `yaml:"key"`
	Tenant string   `yaml:"tenant"`
}

// DefaultContextFile is ~/.config/trellis/cluster.yaml (under $XDG_CONFIG_HOME if set).
func DefaultContextFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = "/root/.config"
	}
	return filepath.Join(dir, "trellis", "cluster.yaml")
}

// LoadContext reads a context file. Unknown keys and missing fields are errors naming the file
// (and line) and saying what to write.
func LoadContext(path string) (*Context, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster context: %w; write one with etcd, cacert, cert, key and tenant (docs/cluster.md)", err)
	}
	var c Context
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("cluster context %s: %v; the keys are etcd (a list of URLs), cacert, cert, key, tenant", path, err)
	}
	var missing []error
	for _, f := range []struct{ name, v string }{{"cacert", c.CACert}, {"cert", c.Cert}, {"key", c.Key}} {
		if f.v == "" {
			missing = append(missing, fmt.Errorf("%s: %s: missing; give the path of the PEM file", path, f.name))
		}
	}
	if len(c.Etcd) == 0 {
		missing = append(missing, fmt.Errorf("%s: etcd: missing; give the client URLs, e.g. [https://10.0.0.1:2379]", path))
	}
	if c.Tenant == "" {
		c.Tenant = DefaultTenant
	}
	if err := checkName("tenant", c.Tenant); err != nil {
		missing = append(missing, fmt.Errorf("%s: tenant: %w", path, err))
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}
	for _, p := range []*string{&c.CACert, &c.Cert, &c.Key} {
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(filepath.Dir(path), *p)
		}
	}
	return &c, nil
}

// Config is how to reach the context's cluster.
func (c *Context) Config() Config {
	return Config{Endpoints: c.Etcd, TLS: pki.Files{CA: c.CACert, Cert: c.Cert, Key: c.Key}}
}
