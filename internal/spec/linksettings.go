package spec

import (
	"encoding/json"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"
)

// A link kind may have settings of its own, among the keys of the link (the lan connector's
// `table:` and `ageing:`): the kind registers how to read them (LinkKind.Settings), and the
// spec layer keeps them as an opaque value (Link.Settings) that the kind reads back.

// LinkSettings is how a link kind reads its own settings.
type LinkSettings struct {
	Keys []string // the link's keys that are the kind's, e.g. table, ageing; no two kinds share one
	// What they are, for messages: "a setting of the lan connector's forwarding table" ("table
	// is a setting of ..., and this link's connector is shortbridge").
	What string
	// Parse reads the keys the link gives (r.Sibling(key)); it is called when it gives one.
	Parse func(r *Reader) Settings
	// New returns a pointer to an empty value of the settings' type, which JSON is read into.
	New func() Settings
}

// linkSettingsKeys are the link keys of the registered link kinds' settings, by kind name.
func linkSettingsKeys() []string {
	var keys []string
	for _, name := range linkKinds.names() {
		if k, _ := linkKinds.lookup(name); k.Settings != nil {
			keys = append(keys, k.Settings.Keys...)
		}
	}
	return keys
}

// checkLinkSettings panics if a link kind's settings keys are taken.
func checkLinkSettings(name string, s *LinkSettings) {
	if len(s.Keys) == 0 || s.Parse == nil || s.New == nil {
		panic(fmt.Sprintf("spec: link kind %q has settings without keys, Parse or New", name))
	}
	for _, key := range s.Keys {
		if slices.Contains(linkSettingsKeys(), key) || slices.Contains(linkKeysBefore, key) || slices.Contains(linkKeysAfter, key) {
			panic(fmt.Sprintf("spec: link kind %q: the key %q is taken", name, key))
		}
	}
}

// linkSettings reads the settings of every link kind whose keys the link gives.
func (p *parser) linkSettings(l *Link, f map[string]*yaml.Node, field string) {
	for _, name := range linkKinds.names() {
		k, _ := linkKinds.lookup(name)
		if k.Settings == nil || !slices.ContainsFunc(k.Settings.Keys, func(key string) bool { return f[key] != nil }) {
			continue
		}
		r := &Reader{p: p, lines: l.lines, keys: f, Field: field}
		l.given = append(l.given, given{owner: name, what: k.Settings.What, value: k.Settings.Parse(r)})
	}
}

// validateLinkSettings keeps the settings of the link's connector and refuses, key by key,
// those of other kinds.
func (p *parser) validateLinkSettings(n *Network, l *Link) {
	for _, g := range l.given {
		if g.owner == l.Connector {
			if g.value != nil {
				l.Settings = &KindSettings{value: g.value}
			}
			continue
		}
		k, _ := linkKinds.lookup(g.owner)
		for _, key := range k.Settings.Keys {
			if _, given := l.lines[key]; given {
				p.add(n.LinkError(l, key, fmt.Sprintf("%s is %s, and this link's connector is %s", key, g.what, l.Connector),
					fmt.Sprintf("remove %s, or give the link `connector: %s`", key, g.owner)))
			}
		}
	}
}

// Showing is Settings that `trellis diff` shows the changes of, setting by setting, in order.
type Showing interface {
	Show() []Shown
}

// Shown is one setting as diff shows it: its name and its value as text.
type Shown struct{ Name, Text string }

// SettingsChanges names the settings that differ between two versions of a kind's settings
// ("table 64 -> default"), those the kind shows (Showing); a setting one version lacks is its
// default. Settings that a kind does not show are "settings changed" when their JSON differs.
func SettingsChanges(a, b Settings) []string {
	as, bs := shownSettings(a), shownSettings(b)
	if as == nil && bs == nil {
		if x, y := settingsJSON(a), settingsJSON(b); x != y {
			return []string{"settings changed"}
		}
		return nil
	}
	var names []string
	for _, sh := range append(slices.Clone(as), bs...) {
		if !slices.Contains(names, sh.Name) {
			names = append(names, sh.Name)
		}
	}
	text := func(shown []Shown, name string) string {
		if i := slices.IndexFunc(shown, func(sh Shown) bool { return sh.Name == name }); i >= 0 {
			return shown[i].Text
		}
		return "default"
	}
	var out []string
	for _, name := range names {
		if x, y := text(as, name), text(bs, name); x != y {
			out = append(out, fmt.Sprintf("%s %s -> %s", name, x, y))
		}
	}
	return out
}

// shownSettings are settings s as diff shows them; nil if their kind shows none.
func shownSettings(s Settings) []Shown {
	if sh, ok := s.(Showing); ok {
		return sh.Show()
	}
	return nil
}

// settingsJSON is settings s as JSON ("null" without any).
func settingsJSON(s Settings) string {
	b, _ := json.Marshal(s)
	return string(b)
}
