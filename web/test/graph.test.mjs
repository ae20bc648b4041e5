// Unit tests of the page's graph model and layout: node --test web/test (run by scripts/test.sh).
import { test } from "node:test";
import assert from "node:assert/strict";
import { endpointsOf, model } from "../src/model.js";
import { forceLayout, groupedLayout } from "../src/layout.js";
import { fmtBits, Rates } from "../src/rates.js";

const ep = (node, iface, extra = {}) => ({ node, interface: iface, tx_bytes: 0, rx_bytes: 0, tx_packets: 0, rx_packets: 0, drops: 0, state: "up", ...extra });

test("endpoints of a link", () => {
  const cases = [
    { name: "a:e1--b:e1", endpoints: [ep("a", "e1"), ep("b", "e1")], want: ["a:e1", "b:e1"] },
    { name: "a:e1--b:e1", endpoints: [ep("a", "e1")], want: ["a:e1", "b:e1"], why: "the other end on another machine" },
    { name: "r1-r2", endpoints: [ep("r1", "eth1"), ep("r2", "eth2")], want: ["r1:eth1", "r2:eth2"], why: "a named link" },
    { name: "lan", endpoints: [ep("a", "e1"), ep("b", "e1"), ep("c", "e1")], want: ["a:e1", "b:e1", "c:e1"] },
  ];
  for (const c of cases) assert.deepEqual(endpointsOf(c), c.want, c.why || c.name);
});

test("a network over two machines: groups, remote nodes, a LAN's hub", () => {
  const info = {
    host: "m1",
    nodes: [{ name: "a", running: true }, { name: "b", running: false }],
    links: [
      { name: "a:e1--c:e1", endpoints: [ep("a", "e1")], tunnels: [{ host: "m2" }] },
      { name: "lan", endpoints: [ep("a", "e2"), ep("b", "e1"), ep("b", "e2")], tunnels: [] },
    ],
  };
  const m = model(info);
  assert.deepEqual(m.groups.map((g) => g.id), ["machine:m1", "machine:m2"]);
  const byId = Object.fromEntries(m.nodes.map((n) => [n.id, n]));
  assert.equal(byId["node:a"].parent, "machine:m1");
  assert.equal(byId["node:b"].kind, "node stopped");
  assert.equal(byId["node:c"].parent, "machine:m2");
  assert.equal(byId["node:c"].kind, "node remote");
  assert.equal(byId["hub:lan"].kind, "hub");
  assert.deepEqual(m.edges.map((e) => `${e.source}>${e.target}`).sort(), ["node:a>hub:lan", "node:a>node:c", "node:b>hub:lan", "node:b>hub:lan"]);
  assert.equal(model({ nodes: info.nodes, links: [] }).groups.length, 0, "one machine: no groups");
});

test("layout: finite, apart, fast", () => {
  for (const n of [1, 2, 4, 50, 200]) {
    const ids = Array.from({ length: n }, (_, i) => `n${i}`);
    const edges = ids.map((id, i) => [id, ids[(i + 1) % n]]);
    const t0 = performance.now();
    const pos = forceLayout(ids, edges, { k: 80 });
    const ms = performance.now() - t0;
    let min = Infinity;
    for (let i = 0; i < n; i++) {
      assert.ok(Number.isFinite(pos[ids[i]].x) && Number.isFinite(pos[ids[i]].y), `${n} nodes: ${ids[i]} at ${JSON.stringify(pos[ids[i]])}`);
      for (let j = i + 1; j < n; j++) min = Math.min(min, Math.hypot(pos[ids[i]].x - pos[ids[j]].x, pos[ids[i]].y - pos[ids[j]].y));
    }
    if (n > 1) assert.ok(min > 20, `${n} nodes: two nodes ${min.toFixed(1)} apart`);
    assert.ok(ms < 2000, `${n} nodes laid out in ${ms} ms`);
  }
  const pos = groupedLayout([{ id: "a", parent: "m1" }, { id: "b", parent: "m2" }], [["a", "b"]], { k: 80 });
  assert.ok(pos.b.x - pos.a.x >= 200, "machines side by side");
});

test("rates from counters", () => {
  const r = new Rates();
  const info = (tx) => ({ links: [{ name: "l", endpoints: [ep("a", "e1", { tx_bytes: tx, drops: tx / 1000 })] }] });
  r.update(info(0), 0);
  const got = r.update(info(125000), 2000).get("l").get("a:e1");
  assert.equal(got.tx, 500000);
  assert.equal(got.drops, 62.5);
  assert.equal(r.update(info(999999), 2100).get("l").get("a:e1").tx, 500000, "0.1 s later: the last rates");
  assert.deepEqual([0, 812, 1234567, 2e9].map(fmtBits), ["0", "812 b/s", "1.2 Mb/s", "2.0 Gb/s"]);
});
