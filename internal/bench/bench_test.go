package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/spec"
)

// The deploy part's chains must pass the same checks as a user's file.
func TestChainTopology(t *testing.T) {
	for _, size := range []int{2, 10, 1000} {
		n, err := spec.Parse("chain.yaml", chainTopology("chain", size))
		if err != nil {
			t.Fatalf("chain of %d: %v", size, err)
		}
		if len(n.Nodes) != size || len(n.Links) != size-1 {
			t.Errorf("chain of %d: %d nodes, %d links", size, len(n.Nodes), len(n.Links))
		}
	}
	if !strings.Contains(string(chainTopology("c", 3)), "10.0.0.5/30") {
		t.Error("second link of a chain is not 10.0.0.4/30")
	}
}

func TestSetupsKnown(t *testing.T) {
	for _, s := range DefaultOptions().Setups {
		if k := setup.Find(s); k == nil {
			t.Errorf("default setup %s is not known", s)
		}
	}
	for _, s := range []string{"veth", "veth-impair", "rate", "egre-shortbridge", "egre-bridge", "egre3-shortbridge", "egre3-bridge", "vxlan"} {
		if !slices.Contains(DefaultOptions().Setups, s) {
			t.Errorf("setup %s is not in a default run", s)
		}
	}
	if q := QuickOptions().Setups; !slices.Contains(q, "egre3-shortbridge") || slices.Contains(q, "egre3-bridge") {
		t.Errorf("quick run's setups %v: want egre3-shortbridge and not egre3-bridge", q)
	}
	if q := QuickOptions().Setups; !slices.Contains(q, "veth") || slices.Contains(q, "veth-impair") || slices.Contains(q, "rate") {
		t.Errorf("quick run's setups %v: want veth (the default link), and neither veth-impair nor rate", q)
	}
}

// An unknown part or setup is an error that names it and lists the known ones; so are options
// that no run can make. Check runs before anything is created.
func TestOptionsCheck(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  func(o *Options)
		wantErr error    // nil: the options are good
		wantIn  []string // the message names these
	}{
		{"defaults", func(o *Options) {}, nil, nil},
		{"quick parts", func(o *Options) { o.Parts = []string{PartForward, PartDeploy} }, nil, nil},
		{"no parts", func(o *Options) { o.Parts = nil }, nil, nil},
		{"unknown part", func(o *Options) { o.Parts = []string{"nosuch"} }, ErrUnknownPart, append([]string{`"nosuch"`}, AllParts...)},
		{"unknown among known", func(o *Options) { o.Parts = []string{PartCPU, "forwrad", "x"} }, ErrUnknownPart, []string{`"forwrad", "x"`, "known: forward, cpu"}},
		{"unknown setup", func(o *Options) { o.Setups = []string{"native", "nosuch"} }, setup.ErrUnknownSetup, append([]string{"--setups", `"nosuch"`}, setup.Names()...)},
		{"direct as a setup", func(o *Options) { o.Setups = []string{setup.Direct} }, nil, nil},
		{"no repetition", func(o *Options) { o.Repeat = 0 }, ErrOptions, []string{"--repeat"}},
		{"chain of one", func(o *Options) { o.Chains = []int{10, 1} }, ErrOptions, []string{"--chains", "not 1"}},
		{"no networks", func(o *Options) { o.Networks = []int{0} }, ErrOptions, []string{"--networks"}},
		{"quick", func(o *Options) { *o = QuickOptions() }, nil, nil},
		{"apply chain of one", func(o *Options) { o.ApplyNodes = 1 }, ErrOptions, []string{"apply", "not 1"}},
		{"cluster part", func(o *Options) { o.Parts = []string{PartCluster} }, nil, nil},
		{"no cluster networks", func(o *Options) { o.ClusterNetworks = 0 }, ErrOptions, []string{"cluster", "not 0"}},
		{"too few impair frames", func(o *Options) { o.ImpairFrames = 999 }, ErrOptions, []string{"impair", "1000", "not 999"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultOptions()
			c.change(&o)
			err := o.Check()
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("Check() = %v, want no error", err)
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("Check() = %v, want %v", err, c.wantErr)
			}
			for _, w := range c.wantIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check() = %q, does not name %q", err, w)
				}
			}
		})
	}
}

func TestPartsTable(t *testing.T) {
	want := []string{PartForward, PartCPU, PartProfile, PartSizes, PartScaling, PartIsolation, PartDeploy, PartLimits, PartApply, PartImpair, PartDelay, PartVM, PartEngines}
	if all := append(slices.Clone(want), PartCluster); !slices.Equal(AllParts, all) {
		t.Errorf("AllParts = %v, want %v", AllParts, all)
	}
	if !slices.Equal(DefaultOptions().Parts, want) {
		t.Errorf("a default run makes parts %v, want every part but the opt-in %v", DefaultOptions().Parts, OptIn)
	}
	if q := QuickOptions(); !slices.Equal(q.Parts, want) || q.ClusterNetworks != 5 || DefaultOptions().ClusterNetworks != 100 {
		t.Errorf("quick run: parts %v, %d cluster networks; full run %d", q.Parts, q.ClusterNetworks, DefaultOptions().ClusterNetworks)
	}
}
