// A layout fast enough for a few hundred nodes in a page's first second: classical
// multidimensional scaling of the hop distances between nodes places them (up to 1500 nodes;
// beyond, on a circle in breadth-first order), then a force-directed pass (Fruchterman–
// Reingold: links pull, nodes push apart, every pair up to 400 nodes and beyond only nodes
// within a few link lengths, found through a grid) evens it out, its moves cooling to nothing.

// forceLayout places ids (strings) joined by edges ([a, b] pairs of ids) and returns
// {id: {x, y}}, centred on 0, 0, with links about k long.
export function forceLayout(ids, edges, { k = 80, iterations = 300 } = {}) {
  const n = ids.length;
  const index = new Map(ids.map((id, i) => [id, i]));
  const adj = ids.map(() => []);
  const es = [];
  for (const [a, b] of edges) {
    const i = index.get(a);
    const j = index.get(b);
    if (i === undefined || j === undefined || i === j) continue;
    adj[i].push(j);
    adj[j].push(i);
    es.push(i, j);
  }
  const x = new Float64Array(n);
  const y = new Float64Array(n);
  let temp;
  if (n > 2 && n <= 1500) {
    mds(adj, x, y, k);
    temp = k / 4;
    iterations = Math.min(iterations, 80); // from a good start, a short pass is enough
  } else {
    const order = bfsOrder(adj);
    const r = Math.max(k, (k * n) / (2 * Math.PI));
    order.forEach((i, pos) => {
      const a = (2 * Math.PI * pos) / n;
      x[i] = r * Math.cos(a);
      y[i] = r * Math.sin(a);
    });
    temp = r / 4;
  }
  const dx = new Float64Array(n);
  const dy = new Float64Array(n);
  const k2 = k * k;
  const cool = temp / iterations;
  for (let it = 0; it < iterations; it++) {
    dx.fill(0);
    dy.fill(0);
    if (n <= 400) repelAll(x, y, dx, dy, k2);
    else repelNear(x, y, dx, dy, k2, 3 * k);
    for (let e = 0; e < es.length; e += 2) {
      const i = es[e];
      const j = es[e + 1];
      const ex = x[i] - x[j];
      const ey = y[i] - y[j];
      const d = Math.sqrt(ex * ex + ey * ey) || 0.01;
      const f = d / k; // (d*d/k) / d
      dx[i] -= ex * f;
      dy[i] -= ey * f;
      dx[j] += ex * f;
      dy[j] += ey * f;
    }
    for (let i = 0; i < n; i++) {
      dx[i] -= x[i] * 0.02; // a little gravity keeps apart pieces near each other
      dy[i] -= y[i] * 0.02;
      const d = Math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]) || 1;
      const step = Math.min(d, temp);
      x[i] += (dx[i] / d) * step;
      y[i] += (dy[i] / d) * step;
    }
    temp = Math.max(temp - cool, k / 50);
  }
  const out = {};
  ids.forEach((id, i) => { out[id] = { x: x[i], y: y[i] }; });
  return out;
}

// mds places the nodes by classical multidimensional scaling of their hop distances (a node
// in another component counts as one hop further than the farthest): the two leading
// eigenvectors of the double-centred squared distances, found by power iteration.
function mds(adj, x, y, k) {
  const n = adj.length;
  const d2 = new Float64Array(n * n);
  const dist = new Int32Array(n);
  let far = 1;
  for (let s = 0; s < n; s++) {
    dist.fill(-1);
    dist[s] = 0;
    const queue = [s];
    for (let q = 0; q < queue.length; q++) {
      const i = queue[q];
      for (const j of adj[i]) if (dist[j] < 0) { dist[j] = dist[i] + 1; queue.push(j); }
    }
    for (let j = 0; j < n; j++) {
      d2[s * n + j] = dist[j];
      if (dist[j] > far) far = dist[j];
    }
  }
  const row = new Float64Array(n);
  let all = 0;
  for (let i = 0; i < n * n; i++) {
    const d = d2[i] < 0 ? far + 1 : d2[i];
    d2[i] = d * d;
    row[Math.floor(i / n)] += d * d;
  }
  for (let i = 0; i < n; i++) {
    row[i] /= n;
    all += row[i] / n;
  }
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) d2[i * n + j] = -0.5 * (d2[i * n + j] - row[i] - row[j] + all);
  const v1 = power(d2, n, null);
  const v2 = power(d2, n, v1.v);
  for (let i = 0; i < n; i++) {
    x[i] = v1.v[i] * Math.sqrt(Math.max(v1.l, 0)) * k;
    y[i] = v2.v[i] * Math.sqrt(Math.max(v2.l, 0)) * k;
  }
}

// power finds the leading eigenvector of the symmetric n×n matrix b (orthogonal to not, if
// given) and its eigenvalue.
function power(b, n, not) {
  let v = new Float64Array(n).map((_, i) => Math.sin(i * 12.9898 + (not ? 1 : 0)) + 0.01);
  let l = 0;
  for (let it = 0; it < 100; it++) {
    if (not) {
      let dot = 0;
      for (let i = 0; i < n; i++) dot += v[i] * not[i];
      for (let i = 0; i < n; i++) v[i] -= dot * not[i];
    }
    const w = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      let s = 0;
      const o = i * n;
      for (let j = 0; j < n; j++) s += b[o + j] * v[j];
      w[i] = s;
    }
    let norm = 0;
    for (let i = 0; i < n; i++) norm += w[i] * w[i];
    norm = Math.sqrt(norm) || 1;
    l = norm;
    for (let i = 0; i < n; i++) w[i] /= norm;
    v = w;
  }
  return { v, l };
}

// bfsOrder lists the nodes component by component, each in breadth-first order.
function bfsOrder(adj) {
  const seen = new Uint8Array(adj.length);
  const order = [];
  for (let s = 0; s < adj.length; s++) {
    if (seen[s]) continue;
    seen[s] = 1;
    const queue = [s];
    for (let q = 0; q < queue.length; q++) {
      const i = queue[q];
      order.push(i);
      for (const j of adj[i]) if (!seen[j]) { seen[j] = 1; queue.push(j); }
    }
  }
  return order;
}

function repelAll(x, y, dx, dy, k2) {
  const n = x.length;
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const ex = x[i] - x[j] || (i - j) * 0.01; // nodes on the same spot: apart anyway
      const ey = y[i] - y[j];
      const d2 = ex * ex + ey * ey || 0.01;
      const f = k2 / d2; // (k*k/d) / d
      dx[i] += ex * f;
      dy[i] += ey * f;
      dx[j] -= ex * f;
      dy[j] -= ey * f;
    }
  }
}

// repelNear pushes apart the nodes within cell of each other, found in a grid of cells.
function repelNear(x, y, dx, dy, k2, cell) {
  const grid = new Map();
  const key = (cx, cy) => cx * 100003 + cy;
  for (let i = 0; i < x.length; i++) {
    const kk = key(Math.floor(x[i] / cell), Math.floor(y[i] / cell));
    const list = grid.get(kk);
    if (list) list.push(i);
    else grid.set(kk, [i]);
  }
  for (let i = 0; i < x.length; i++) {
    const cx = Math.floor(x[i] / cell);
    const cy = Math.floor(y[i] / cell);
    for (let ox = -1; ox <= 1; ox++) {
      for (let oy = -1; oy <= 1; oy++) {
        for (const j of grid.get(key(cx + ox, cy + oy)) || []) {
          if (j === i) continue;
          const ex = x[i] - x[j] || (i - j) * 0.01;
          const ey = y[i] - y[j];
          const d2 = ex * ex + ey * ey || 0.01;
          const f = k2 / d2;
          dx[i] += ex * f;
          dy[i] += ey * f;
        }
      }
    }
  }
}

// groupedLayout lays out each group's nodes (by group id; "" for none) on its own and puts
// the groups side by side, left to right.
export function groupedLayout(nodes, edges, opts) {
  const groups = new Map();
  for (const nd of nodes) {
    const g = nd.parent || "";
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(nd.id);
  }
  const groupOf = new Map(nodes.map((nd) => [nd.id, nd.parent || ""]));
  const out = {};
  let left = 0;
  for (const [g, ids] of groups) {
    const inner = edges.filter(([a, b]) => groupOf.get(a) === g && groupOf.get(b) === g);
    const pos = forceLayout(ids, inner, opts);
    let minX = Infinity;
    let maxX = -Infinity;
    for (const p of Object.values(pos)) {
      minX = Math.min(minX, p.x);
      maxX = Math.max(maxX, p.x);
    }
    for (const [id, p] of Object.entries(pos)) out[id] = { x: p.x - minX + left, y: p.y };
    left += maxX - minX + 200;
  }
  return out;
}
