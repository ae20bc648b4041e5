package spec

import (
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"
)

// A tunnel kind may have settings of its own, keys of the file's `tunnel:` beside its kind
// (`tunnel: {kind: NAME, KEY: VALUE}`; `tunnel: NAME` gives none): the kind registers how to
// read them (TunnelKind.Settings), and the spec layer keeps them as an opaque value
// (Network.TunnelSettings, plan.Plan.TunnelSettings) that the kind reads back.

// TunnelSettings is how a tunnel kind reads its own settings.
type TunnelSettings struct {
	Keys []string // the keys of `tunnel:` that are the kind's; no two kinds share one
	// What they are, for messages: "a setting of the vxlan tunnel" ("port is a setting of the
	// vxlan tunnel, and this network's tunnel is egre").
	What string
	// Parse reads the keys the file gives (r.Sibling(key)); it is called when it gives one.
	Parse func(r *Reader) Settings
	// New returns a pointer to an empty value of the settings' type, which JSON is read into.
	New func() Settings
}

// tunnelKindKey is the key of a `tunnel:` mapping that names the tunnel kind.
const tunnelKindKey = "kind"

// tunnelSettingsKeys are the keys of the registered tunnel kinds' settings.
func tunnelSettingsKeys() []string {
	var keys []string
	for _, name := range tunnelKinds.names() {
		if k, _ := tunnelKinds.lookup(name); k.Settings != nil {
			keys = append(keys, k.Settings.Keys...)
		}
	}
	return keys
}

// checkTunnelSettings panics if a tunnel kind's settings keys are taken.
func checkTunnelSettings(name string, s *TunnelSettings) {
	if len(s.Keys) == 0 || s.Parse == nil || s.New == nil {
		panic(fmt.Sprintf("spec: tunnel kind %q has settings without keys, Parse or New", name))
	}
	for _, key := range s.Keys {
		if key == tunnelKindKey || slices.Contains(tunnelSettingsKeys(), key) {
			panic(fmt.Sprintf("spec: tunnel kind %q: the key %q is taken", name, key))
		}
	}
}

// tunnelName reads `tunnel:`: a tunnel kind's name, or a mapping of its `kind:` (DefaultTunnel
// if not given) and the settings of tunnel kinds, which it reads into n (validateTunnelSettings
// keeps those of the kind named). ok is false if there is no name to take.
func (p *parser) tunnelName(n *Network, tunnel *yaml.Node) (string, bool) {
	if tunnel.Kind != yaml.MappingNode {
		return p.str(tunnel, "tunnel")
	}
	f, ok := p.fields(tunnel, "tunnel", append([]string{tunnelKindKey}, tunnelSettingsKeys()...)...)
	if !ok {
		return "", false
	}
	for key, v := range f {
		n.lines["tunnel."+key] = v.Line
	}
	for _, name := range tunnelKinds.names() {
		k, _ := tunnelKinds.lookup(name)
		if k.Settings == nil || !slices.ContainsFunc(k.Settings.Keys, func(key string) bool { return f[key] != nil }) {
			continue
		}
		r := &Reader{p: p, lines: n.lines, keys: f, Field: "tunnel"}
		n.tunnelGiven = append(n.tunnelGiven, given{owner: name, what: k.Settings.What, value: k.Settings.Parse(r)})
	}
	if v := f[tunnelKindKey]; v != nil {
		return p.str(v, "tunnel.kind")
	}
	return DefaultTunnel, true
}

// validateTunnelSettings keeps the settings of the network's tunnel kind and refuses, key by
// key, those of other kinds.
func (p *parser) validateTunnelSettings(n *Network) {
	for _, g := range n.tunnelGiven {
		switch {
		case n.Tunnel == "": // refused already: no hosts, or an unknown kind
			continue
		case g.owner == n.Tunnel:
			if g.value != nil {
				n.TunnelSettings = &KindSettings{value: g.value}
			}
			continue
		}
		k, _ := tunnelKinds.lookup(g.owner)
		for _, key := range k.Settings.Keys {
			if _, given := n.lines["tunnel."+key]; given {
				p.add(n.NetworkError("tunnel."+key, fmt.Sprintf("%s is %s, and this network's tunnel is %s", key, g.what, n.Tunnel),
					fmt.Sprintf("remove %s, or give the file `tunnel: {kind: %s}`", key, g.owner)))
			}
		}
	}
	n.tunnelGiven = nil
}

// TunnelKindSettings returns the settings of the network's tunnel kind, or nil.
func (n *Network) TunnelKindSettings() Settings {
	return TunnelKindSettings(n.Tunnel, n.TunnelSettings)
}

// TunnelKindSettings returns the settings s of tunnel kind kind, read from JSON with the kind's
// TunnelSettings.New the first time (plan.Plan keeps them too).
func TunnelKindSettings(kind string, s *KindSettings) Settings {
	if s == nil {
		return nil
	}
	var newValue func() Settings
	if k, ok := tunnelKinds.lookup(kind); ok && k.Settings != nil {
		newValue = k.Settings.New
	}
	return s.Value(newValue)
}
