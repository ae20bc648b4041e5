package spec

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"gopkg.in/yaml.v3"
)

// A node kind may have settings of its own, under one key of the node (a VM's `vm:`): the kind
// registers how to read them (NodeKind.Settings) and checks them (NodeKind.Check), and the spec
// layer keeps what it read as an opaque value (Node.Settings). So a kind with settings is one
// package; nothing here names it (docs/architecture.md, "Adding a kind").

// Settings are a node kind's own settings, as its NodeSettings.Parse read them. plan.Digest
// holds their JSON (a field added with `omitempty` changes no running node's digest), and the
// record keeps them: they must marshal to JSON and back (NodeSettings.New).
type Settings any

// NodeSettings is how a node kind reads its own settings.
type NodeSettings struct {
	Key  string // the node's key they are under, e.g. "vm"; no two kinds share one
	What string // what they are, for messages: "VM settings" ("a container node has no VM settings")
	// Parse reads the key's value v. It reports what is wrong through r, at the lines of the
	// file, and returns nil only when there is nothing to keep (v is not a mapping at all).
	Parse func(r *Reader, v *yaml.Node) Settings
	// New returns a pointer to an empty value of the settings' type, which a record's JSON is
	// read into.
	New func() Settings
}

// settingsKeys are the node keys of the registered kinds' settings, sorted.
func settingsKeys() []string {
	var keys []string
	for _, name := range nodeKinds.names() {
		if k, _ := nodeKinds.lookup(name); k.Settings != nil {
			keys = append(keys, k.Settings.Key)
		}
	}
	slices.Sort(keys)
	return keys
}

// settingsOwner returns the kind whose settings are under key.
func settingsOwner(key string) (string, *NodeSettings) {
	for _, name := range nodeKinds.names() {
		if k, _ := nodeKinds.lookup(name); k.Settings != nil && k.Settings.Key == key {
			return name, k.Settings
		}
	}
	return "", nil
}

// checkSettingsKey panics if a kind's settings key is taken.
func checkSettingsKey(name string, s *NodeSettings) {
	if s.Key == "" || s.Parse == nil || s.New == nil {
		panic(fmt.Sprintf("spec: node kind %q has settings without a key, Parse or New", name))
	}
	if owner, _ := settingsOwner(s.Key); owner != "" || slices.Contains(nodeKeys, s.Key) {
		panic(fmt.Sprintf("spec: node kind %q: the key %q is taken", name, s.Key))
	}
}

// given is one kind's settings given in a node or link, with what its Parse read.
type given struct {
	key, owner string // a node kind's key; for a link kind, key is ""
	what       string
	value      Settings
}

// nodeSettings reads every settings key among the node's keys f.
func (p *parser) nodeSettings(nd *Node, f map[string]*yaml.Node, field string) {
	for _, key := range settingsKeys() {
		v := f[key]
		if v == nil {
			continue
		}
		owner, ks := settingsOwner(key)
		r := &Reader{p: p, lines: nd.lines, keys: f, Field: join(field, key)}
		if s := ks.Parse(r, v); s != nil {
			nd.given = append(nd.given, given{key, owner, ks.What, s})
		}
	}
}

// validateSettings keeps the settings of the node's kind (registered) and refuses those of
// other kinds.
func (p *parser) validateSettings(n *Network, nd *Node) {
	for _, g := range nd.given {
		if g.owner == nd.Kind {
			nd.Settings = &KindSettings{value: g.value}
			continue
		}
		p.add(n.NodeError(nd, g.key, fmt.Sprintf("a %s node has no %s", nd.Kind, g.what), fmt.Sprintf("remove `%s:`, or make the node `kind: %s`", g.key, g.owner)))
	}
}

// KindSettings holds a node's kind's settings. Read from a record, they stay JSON until Value
// asks for them, when the node's kind is known.
type KindSettings struct {
	mu    sync.Mutex
	value Settings
	raw   json.RawMessage
}

// NewKindSettings holds s, for a node made by a program rather than read from a file.
func NewKindSettings(s Settings) *KindSettings { return &KindSettings{value: s} }

// KindSettingsJSON holds settings as JSON (of the settings, or of an object with their fields
// among others), which Value reads.
func KindSettingsJSON(raw []byte) *KindSettings {
	return &KindSettings{raw: append(json.RawMessage(nil), raw...)}
}

// Value returns the settings, read from their JSON the first time into newValue() (nil if it
// is nil or the JSON does not fit).
func (k *KindSettings) Value(newValue func() Settings) Settings {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.value == nil && k.raw != nil && newValue != nil {
		s := newValue()
		if json.Unmarshal(k.raw, s) != nil {
			return nil
		}
		k.value = s
	}
	return k.value
}

// MarshalJSON writes the settings as their own JSON.
func (k *KindSettings) MarshalJSON() ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.value != nil:
		return json.Marshal(k.value)
	case k.raw != nil:
		return k.raw, nil
	}
	return []byte("null"), nil
}

// UnmarshalJSON keeps the JSON until the kind reads it (Node.KindSettings).
func (k *KindSettings) UnmarshalJSON(b []byte) error {
	k.raw = append(json.RawMessage(nil), b...)
	return nil
}

// KindSettings returns the settings of the node's kind (nil if it has none), read from the
// record's JSON with the kind's NodeSettings.New the first time.
func (nd *Node) KindSettings() Settings {
	if nd.Settings == nil {
		return nil
	}
	var newValue func() Settings
	if k, ok := nodeKinds.lookup(nd.Kind); ok && k.Settings != nil {
		newValue = k.Settings.New
	}
	return nd.Settings.Value(newValue)
}

// KindSettings returns the settings of the link's kind (its connector), or nil.
func (l *Link) KindSettings() Settings { return LinkKindSettings(l.Connector, l.Settings) }

// LinkKindSettings returns the settings s of link kind connector, read from JSON with the
// kind's LinkSettings.New the first time (plan.Link keeps them too).
func LinkKindSettings(connector string, s *KindSettings) Settings {
	if s == nil {
		return nil
	}
	var newValue func() Settings
	if k, ok := linkKinds.lookup(connector); ok && k.Settings != nil {
		newValue = k.Settings.New
	}
	return s.Value(newValue)
}

// Reader is what a kind's NodeSettings.Parse reads the node's settings with: the parser's own
// checks, whose problems name the file, the line and the field.
type Reader struct {
	p     *parser
	lines map[string]int        // the node's or link's lines of fields (FieldLine)
	keys  map[string]*yaml.Node // the node's or link's keys
	// Field is the settings' field, e.g. "nodes.r1.vm"; for a link kind's, the link's,
	// e.g. "links[0]".
	Field string
}

// Fail records a problem at node at of the YAML tree.
func (r *Reader) Fail(at *yaml.Node, field, msg, fix string) { r.p.fail(at, field, msg, fix) }

// Fields reads a mapping whose keys must be among allowed; ok is false if it is not a mapping.
func (r *Reader) Fields(n *yaml.Node, field string, allowed ...string) (map[string]*yaml.Node, bool) {
	return r.p.fields(n, field, allowed...)
}

// Str reads a single value.
func (r *Reader) Str(n *yaml.Node, field string) (string, bool) { return r.p.str(n, field) }

// Line records the line of one of the node's fields (Node.FieldLine), e.g. "vm.disk".
func (r *Reader) Line(field string, line int) { r.lines[field] = line }

// Sibling returns the node's (or link's) key named key (e.g. "exec"), or nil.
func (r *Reader) Sibling(key string) *yaml.Node { return r.keys[key] }

// Cluster says the file is a cluster's: it may name no file of a machine, only images of the
// machines' image store (ImageName).
func (r *Reader) Cluster() bool { return r.p.cluster }

// HostPath refuses a path of this machine in a file sent to the API (fix says what to do
// instead), and says whether it did.
func (r *Reader) HostPath(n *yaml.Node, field, fix string) bool { return r.p.hostPath(n, field, fix) }

// Beside is path, or, if it is relative, path in the topology file's directory.
func (r *Reader) Beside(path string) string { return r.p.besideFile(path) }

// Granted is Settings of which some need a grant of a cluster tenant's quota (a VM's real-time
// priorities need GrantRealtime): the cluster refuses them without it.
type Granted interface {
	Grants() []Grant
}

// Grant is one setting that needs a grant: its field, e.g. "vm.pin", and the grant.
type Grant struct{ Field, Grant string }

// The grants of a cluster tenant's quota that settings may need.
const (
	GrantRealtime = "realtime" // real-time scheduling: fixed priorities, reservations
	GrantPin      = "pin"      // pinning to cores
)
