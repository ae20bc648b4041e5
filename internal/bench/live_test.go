package bench

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/substrate"
)

// The apply part's files are chains a user could write: the rate lands on the middle link
// only, and each step's file differs from the one before by what the step says.
func TestApplyFiles(t *testing.T) {
	const n = 10
	for rep := 0; rep < 3; rep++ {
		steps := applySteps(n, rep)
		if got := []string{steps[0].change, steps[1].change, steps[2].change, steps[3].change}; !slices.Equal(got, []string{ApplyUnchanged, ApplyRate, ApplyAddNode, ApplyRemove}) {
			t.Fatalf("steps %v", got)
		}
		before := 0 // the rate before the repetition: that of the one before
		if rep > 0 {
			before = applySteps(n, rep-1)[1].mbit
		}
		if steps[0].mbit != before || steps[0].nodes != n {
			t.Errorf("repetition %d: the unchanged file has %d nodes, %d Mbit/s; want %d, %d", rep, steps[0].nodes, steps[0].mbit, n, before)
		}
		if steps[1].mbit == before || steps[1].mbit == 0 {
			t.Errorf("repetition %d: the rate step sets %d Mbit/s, after %d", rep, steps[1].mbit, before)
		}
		if steps[2].nodes != n+1 || steps[3].nodes != n || steps[2].mbit != steps[1].mbit || steps[3].mbit != steps[1].mbit {
			t.Errorf("repetition %d: add and remove steps %+v %+v", rep, steps[2], steps[3])
		}
		for _, s := range steps {
			net, err := spec.Parse("chain.yaml", ratedChain("chain", s.nodes, n/2-1, s.mbit))
			if err != nil {
				t.Fatalf("%s: %v", s.change, err)
			}
			for i, l := range net.Links {
				want := uint64(0)
				if i == n/2-1 {
					want = uint64(s.mbit) * 1e6
				}
				if l.Rate != want {
					t.Errorf("%s: link %d (%s) rate %d, want %d", s.change, i, l.Name, l.Rate, want)
				}
			}
		}
	}
	if string(ratedChain("c", 5, -1, 0)) != string(chainTopology("c", 5)) || strings.Contains(string(ratedChain("c", 5, 1, 0)), "rate") {
		t.Error("a chain without a rate has one")
	}
}

func TestCheckApplied(t *testing.T) {
	link := func(op string) substrate.Change { return substrate.Change{Op: op, Object: "link", Name: "l"} }
	node := func(op string) substrate.Change { return substrate.Change{Op: op, Object: "node", Name: "n"} }
	steps := applySteps(10, 0)
	for _, c := range []struct {
		step applyStep
		got  []substrate.Change
		ok   bool
	}{
		{steps[0], nil, true},
		{steps[0], []substrate.Change{link("change")}, false},
		{steps[1], []substrate.Change{link("change")}, true},
		{steps[1], []substrate.Change{link("change"), node("restart")}, false},
		{steps[1], nil, false},
		{steps[2], []substrate.Change{node("add"), link("add")}, true},
		{steps[2], []substrate.Change{node("add"), link("add"), node("restart")}, false},
		{steps[3], []substrate.Change{node("remove"), link("remove")}, true},
		{steps[3], []substrate.Change{node("remove")}, false},
	} {
		err := checkApplied(c.step, c.got)
		if (err == nil) != c.ok {
			t.Errorf("%s with %v: %v", c.step.change, c.got, err)
		}
	}
}

// Every impairment the part measures is a valid file and sets what it says on the link; the
// delay it asks for parses (it is the kernel, or trellis, that refuses it).
func TestImpairFiles(t *testing.T) {
	for _, text := range append(slices.Clone(Impairments), impairDelay) {
		n, err := spec.Parse("bench-impair.yaml", impairTopology(text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if len(n.Links) != 1 || len(n.Nodes) != 2 {
			t.Fatalf("%q: %d nodes, %d links", text, len(n.Nodes), len(n.Links))
		}
		if im := n.Links[0].Impair; im.IsZero() != (text == "") {
			t.Errorf("%q: impairment %+v", text, im)
		}
	}
	n, err := spec.Parse("x.yaml", impairTopology("loss: 10% 50%"))
	if err != nil {
		t.Fatal(err)
	}
	if im := n.Links[0].Impair; im.Loss != 10 || im.LossCorrelation != 50 {
		t.Errorf("loss: 10%% 50%% parsed as %+v", im)
	}
}

func TestWantBurst(t *testing.T) {
	for _, c := range []struct {
		im   spec.Impairment
		want float64
	}{
		{spec.Impairment{}, 0},
		{spec.Impairment{Loss: 10}, 1 / 0.9},
		{spec.Impairment{Loss: 10, LossCorrelation: 50}, 1 / (0.5 * 0.9)},
		{spec.Impairment{Loss: 30}, 1 / 0.7},
		{spec.Impairment{Loss: 100}, 0},
	} {
		if got := wantBurst(c.im); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("wantBurst(%+v) = %v, want %v", c.im, got, c.want)
		}
	}
}
