package substrate

import (
	"fmt"
	"time"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// maxNetIDTries bounds the search for a free network id; a state directory holds far fewer
// networks than the 16 million ids.
const maxNetIDTries = 1 << 16

// saveNew writes the first record of a new network, whose plan p was made with the id its name
// derives. The id is allocated under the machine's lock, so that no two networks of the state
// directory ever have one: the derived id if no other network has it, else the first free of
// those derived from the name and a counter (then the plan is made again with it). A name can
// therefore never block another network, whatever ids their names derive (device names,
// control groups and process markers all carry the id).
func saveNew(st *state.Store, n *spec.Network, host, file string, p *plan.Plan, names *plan.Names) (*state.Record, error) {
	unlock, err := st.LockMachine()
	if err != nil {
		return nil, err
	}
	defer unlock()
	id, err := allocNetID(st, n.Name)
	if err != nil {
		return nil, err
	}
	if id != p.NetID {
		names = &plan.Names{NetID: id}
		if p, err = plan.Make(n, st.ID, host, names); err != nil {
			return nil, err
		}
	}
	rec := &state.Record{Name: p.Network, NetID: p.NetID, File: file, Status: state.Creating,
		Created: time.Now().UTC(), Plan: p, Names: names, Nodes: map[string]int{}}
	return rec, st.Save(rec)
}

// allocNetID returns an id that no other network of the state directory has (call it under the
// machine's lock).
func allocNetID(st *state.Store, name string) (string, error) {
	recs, err := st.List()
	if err != nil {
		return "", err
	}
	taken := map[string]bool{}
	for _, r := range recs {
		if r.Name != name {
			taken[r.NetID] = true
		}
	}
	id := plan.NetID(st.ID, name)
	for i := 1; taken[id]; i++ {
		if i == maxNetIDTries {
			return "", fmt.Errorf("network %s: no free network id in %d tries", name, maxNetIDTries)
		}
		id = plan.NetID(st.ID, fmt.Sprintf("%s#%d", name, i))
	}
	return id, nil
}
