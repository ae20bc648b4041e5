package lan

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"gopkg.in/yaml.v3"
)

// Bounds of a LAN's forwarding table settings.
const (
	MaxTable  = 1 << 20
	MinAgeing = time.Second
	MaxAgeing = 24 * time.Hour
)

// Settings are the LAN's forwarding table settings, the link's `table:` (its size in
// addresses) and `ageing:` (how long an address is kept after its last frame); 0 means the
// connector's default. Their JSON is among the link's own fields in a plan (plan.Link), as it
// was when they were fields of the link: a field added must be `omitempty`.
type Settings struct {
	Table  int           `json:",omitempty"`
	Ageing time.Duration `json:",omitempty"`
}

// linkSettings registers the settings with the kind (spec/linksettings.go).
var linkSettings = &spec.LinkSettings{
	Keys:  []string{"table", "ageing"},
	What:  "a setting of the " + Name + " connector's forwarding table",
	Parse: func(r *spec.Reader) spec.Settings { return readSettings(r) },
	New:   func() spec.Settings { return &Settings{} },
}

// settingsOf returns link l's table settings; zero if it has none.
func settingsOf(l *plan.Link) Settings {
	if s, ok := l.KindSettings().(*Settings); ok {
		return *s
	}
	return Settings{}
}

// readSettings reads a link's `table:` (addresses) and `ageing:` (a duration).
func readSettings(p *spec.Reader) *Settings {
	s := &Settings{}
	field := p.Field
	if v := p.Sibling("table"); v != nil {
		n, err := strconv.Atoi(v.Value)
		if err != nil || v.Kind != yaml.ScalarNode || n < 1 || n > MaxTable {
			p.Fail(v, field+".table", fmt.Sprintf("%q is not a table size", v.Value), fmt.Sprintf("give the number of addresses the LAN learns, from 1 to %d", MaxTable))
		} else {
			s.Table = n
		}
	}
	if v := p.Sibling("ageing"); v != nil {
		text, ok := p.Str(v, field+".ageing")
		if !ok {
			return s
		}
		d, err := time.ParseDuration(text)
		if err != nil || d < MinAgeing || d > MaxAgeing {
			p.Fail(v, field+".ageing", fmt.Sprintf("%q is not an ageing time", text), fmt.Sprintf("give a duration from %v to %v, such as 300s or 5m", MinAgeing, MaxAgeing))
		} else {
			s.Ageing = d
		}
	}
	return s
}

// Show lists the settings as `trellis diff` shows their changes (spec.Shown).
func (s *Settings) Show() []spec.Shown {
	return []spec.Shown{{Name: "table", Text: defaultText(s.Table)}, {Name: "ageing", Text: defaultText(s.Ageing)}}
}

func defaultText[T comparable](v T) string {
	var zero T
	if v == zero {
		return "default"
	}
	return fmt.Sprint(v)
}

// ReadTable reads the LAN's table through member via (the table is one per LAN, shared by its
// members): kinds.TableReader.
func (Kind) ReadTable(l *plan.Link, via int, members map[int]string) *kinds.TableInfo {
	s := settingsOf(l)
	li := &kinds.TableInfo{Table: s.Table, Ageing: s.Ageing.Seconds()}
	if li.Table == 0 {
		li.Table = dataplane.DefaultLANEntries
	}
	if s.Ageing == 0 {
		li.Ageing = dataplane.DefaultLANAging.Seconds()
	}
	entries, counters, err := dataplane.ReadLAN(via)
	if err != nil {
		li.Error = err.Error()
		return li
	}
	li.Counters = counters
	for _, e := range entries {
		m, ok := members[e.Ifindex]
		if !ok {
			m = "gone member"
		}
		li.Entries = append(li.Entries, kinds.TableEntry{MAC: e.MAC.String(), Member: m, Idle: e.Idle.Seconds()})
	}
	sort.Slice(li.Entries, func(i, j int) bool { return li.Entries[i].MAC < li.Entries[j].MAC })
	return li
}
