package spec

import (
	"fmt"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"
)

// The keys every link may have; the keys of the link kinds' settings come between these (in the
// list of allowed keys that messages show).
var (
	linkKeysBefore = []string{"name", "endpoints", "rate", "mtu", "connector", "state"}
	linkKeysAfter  = append(slices.Clone(impairKeys), "from")
)

// link reads one item of `links:`; nil if it is not a mapping at all.
func (p *parser) link(n *yaml.Node, index int) *Link {
	field := fmt.Sprintf("links[%d]", index)
	f, ok := p.fields(n, field, slices.Concat(linkKeysBefore, linkSettingsKeys(), linkKeysAfter)...)
	if !ok {
		return nil
	}
	l := &Link{Line: n.Line, State: StateUp, index: index, lines: map[string]int{}}
	for k, v := range f {
		l.lines[k] = v.Line
	}
	if v := f["name"]; v != nil {
		l.Name, _ = p.str(v, field+".name")
		l.named = true
	}
	p.endpoints(l, n, f["endpoints"], field+".endpoints")
	if v := f["rate"]; v != nil {
		if text, ok := p.str(v, field+".rate"); ok {
			rate, err := ParseRate(text)
			if err != nil {
				p.fail(v, field+".rate", err.Error(), "write a number and a unit such as 500kbit, 10mbit or 1gbit")
			} else {
				l.Rate, l.RateText = rate, text
			}
		}
	}
	if v := f["mtu"]; v != nil {
		mtu, err := strconv.Atoi(v.Value)
		if err != nil || v.Kind != yaml.ScalarNode || mtu < minMTU || mtu > maxMTU {
			p.fail(v, field+".mtu", fmt.Sprintf("%q is not an MTU", v.Value), fmt.Sprintf("give a whole number from %d to %d", minMTU, maxMTU))
		} else {
			l.MTU, l.MTULine = mtu, v.Line
		}
	}
	if v := f["connector"]; v != nil {
		l.Connector, _ = p.str(v, field+".connector")
	}
	if v := f["state"]; v != nil {
		if s, ok := p.str(v, field+".state"); ok && s != StateUp && s != StateDown {
			p.fail(v, field+".state", fmt.Sprintf("%q is not a link state", s), "write up or down")
		} else if ok {
			l.State = s
		}
	}
	p.linkSettings(l, f, field)
	p.impairment(&l.Impair, f, field, "", l.lines)
	if v := f["from"]; v != nil {
		p.from(l, v, field+".from")
	}
	return l
}

// endpoints reads a link's `endpoints:` list.
func (p *parser) endpoints(l *Link, link, ep *yaml.Node, field string) {
	if ep == nil {
		p.fail(link, field, "missing", "list the interfaces the link joins, e.g. `endpoints: [r1:eth1, r2:eth1]`")
		p.endpointsBad, l.incomplete = true, true
		return
	}
	eps, at, ok := p.strs(ep, field)
	if !ok {
		p.endpointsBad, l.incomplete = true, true
		return
	}
	for i, s := range eps {
		e, err := parseEndpoint(s)
		if err != nil {
			p.fail(at[i], fmt.Sprintf("%s[%d]", field, i), err.Error(), "write NODE:IFNAME, e.g. r1:eth1")
			p.endpointsBad, l.incomplete = true, true
			continue
		}
		e.Line = at[i].Line
		l.Endpoints = append(l.Endpoints, e)
	}
}

// impairment reads the impairment keys among f into im, recording their lines under prefix
// in lines. It returns which keys were given.
func (p *parser) impairment(im *Impairment, f map[string]*yaml.Node, field, prefix string, lines map[string]int) map[string]bool {
	given := map[string]bool{}
	for _, key := range impairKeys {
		v := f[key]
		if v == nil {
			continue
		}
		lines[prefix+key] = v.Line
		text, ok := p.str(v, field+"."+key)
		if !ok {
			continue
		}
		if err := setImpair(im, key, text); err != nil {
			p.fail(v, field+"."+key, err.Error(), impairFix[key])
			continue
		}
		given[key] = true
	}
	return given
}

// from reads a link's `from:` mapping: per endpoint, the impairment of the frames it sends,
// merged over the link-level one.
func (p *parser) from(l *Link, v *yaml.Node, field string) {
	keys, vals, _ := p.pairs(v, field, mapping{"expected a mapping from endpoint to impairments", "write e.g. `from: {r1:eth1: {loss: 5%}}`",
		"endpoint given twice", "give each endpoint's impairments under one key"})
	for i, k := range keys {
		fld := join(field, k.Value)
		l.lines["from."+k.Value] = k.Line
		f, ok := p.fields(vals[i], fld, impairKeys...)
		if !ok {
			continue
		}
		im := l.Impair
		given := p.impairment(&im, f, fld, "from."+k.Value+".", l.lines)
		if l.From == nil {
			l.From = map[string]Impairment{}
		}
		l.From[k.Value] = im
		if l.fromGiven == nil {
			l.fromGiven = map[string]map[string]bool{}
		}
		l.fromGiven[k.Value] = given
	}
}
