package plan

import (
	"encoding/json"

	"github.com/trellisnet/trellis/internal/spec"
)

// A link's JSON (the record's plans; substrate compares links by it) has its kind's settings
// among its own fields, as when the lan connector's table and ageing were fields of Link: a
// record written before they moved into the kind reads the same, and an unchanged link compares
// equal to it.

// linkFields is Link without its JSON methods.
type linkFields Link

// MarshalJSON writes the link's fields, then its kind's settings' fields.
func (l Link) MarshalJSON() ([]byte, error) {
	data, err := json.Marshal(linkFields(l))
	s := l.KindSettings()
	if err != nil || s == nil {
		return data, err
	}
	more, err := json.Marshal(s)
	if err != nil || len(more) <= 2 { // {}: every setting is its default
		return data, err
	}
	return append(append(data[:len(data)-1], ','), more[1:]...), nil
}

// UnmarshalJSON reads the link's fields, and keeps the whole object for its kind's settings,
// which pick their fields from it when the kind reads them (KindSettings).
func (l *Link) UnmarshalJSON(data []byte) error {
	if err := json.Unmarshal(data, (*linkFields)(l)); err != nil {
		return err
	}
	l.Settings = spec.KindSettingsJSON(data)
	return nil
}

// KindSettings returns the settings of the link's kind (its connector), or nil.
func (l *Link) KindSettings() spec.Settings { return spec.LinkKindSettings(l.Connector, l.Settings) }
