// The graph of a network, from its inspect: nodes (grouped by machine for a network over
// several), and links as edges, or as a hub joined to each endpoint when a link has more than
// two.

// endpointsOf lists a link's endpoints as "node:interface": those on this machine from
// inspect, the others from the link's name when it is the endpoints joined with "--".
export function endpointsOf(link) {
  const local = (link.endpoints || []).map((e) => `${e.node}:${e.interface}`);
  const named = link.name.split("--");
  if (named.length >= 2 && named.every((s) => /^[^:\s]+:[^:\s]+$/.test(s)) && local.every((e) => named.includes(e))) {
    return named;
  }
  return local;
}

const nodeOf = (ep) => ep.slice(0, ep.indexOf(":"));

// model returns {groups, nodes, edges}: cytoscape element data, with ids that stay the same
// from one inspect to the next so that the graph keeps its layout.
export function model(info) {
  const multi = Boolean(info.host);
  const groups = new Map();
  const nodes = new Map();
  const group = (host) => {
    if (!multi) return undefined;
    const id = `machine:${host}`;
    if (!groups.has(id)) groups.set(id, { id, label: host, kind: "machine", local: host === info.host });
    return id;
  };
  for (const n of info.nodes || []) {
    nodes.set(n.name, { id: `node:${n.name}`, name: n.name, label: n.name, kind: n.running ? "node" : "node stopped", parent: group(info.host) });
  }
  const edges = [];
  for (const l of info.links || []) {
    const eps = endpointsOf(l);
    const remoteHost = (l.tunnels || []).length === 1 ? l.tunnels[0].host : "other machines";
    for (const ep of eps) {
      const name = nodeOf(ep);
      if (!nodes.has(name)) {
        nodes.set(name, { id: `node:${name}`, name, label: name, kind: "node remote", parent: group(remoteHost) });
      }
    }
    if (eps.length === 2) {
      edges.push({ id: `link:${l.name}`, link: l.name, source: `node:${nodeOf(eps[0])}`, target: `node:${nodeOf(eps[1])}`, a: eps[0], b: eps[1] });
      continue;
    }
    // A LAN, or a link whose other endpoints are on other machines under a name of its own.
    const hub = `hub:${l.name}`;
    const parents = new Set(eps.map((ep) => nodes.get(nodeOf(ep)).parent));
    nodes.set(hub, { id: hub, label: l.name, kind: "hub", link: l.name, parent: parents.size === 1 ? [...parents][0] : undefined });
    if (eps.length === 1 && (l.tunnels || []).length > 0) {
      for (const t of l.tunnels) {
        const far = `far:${l.name}:${t.host}`;
        nodes.set(far, { id: far, label: `${l.name} on ${t.host}`, kind: "node remote", parent: group(t.host) });
        edges.push({ id: `link:${l.name}|${t.host}`, link: l.name, source: hub, target: far, tunnel: t.host });
      }
    }
    for (const ep of eps) {
      edges.push({ id: `link:${l.name}|${ep}`, link: l.name, source: `node:${nodeOf(ep)}`, target: hub, a: ep });
    }
  }
  return { groups: [...groups.values()], nodes: [...nodes.values()], edges };
}

// signature identifies a model's shape: the graph is rebuilt only when it changes.
export function signature(m) {
  return [...m.groups.map((g) => g.id), ...m.nodes.map((n) => `${n.id}<${n.parent || ""}`), ...m.edges.map((e) => e.id)].join("\n");
}
