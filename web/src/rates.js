// Rates: counters of successive inspects turned into bits, frames and drops per second.

// Rates keeps the previous counters of each endpoint (by link and node:interface).
export class Rates {
  constructor() {
    this.prev = new Map();
    this.at = null; // when the previous counters were read
    this.last = null; // the rates last computed
  }

  // update takes an inspect and returns, per link name, its endpoints' rates:
  // {tx, rx (bit/s), txp, rxp (frames/s), drops (/s)} by "node:interface".
  update(info, now = performance.now()) {
    const dt = this.at === null ? 0 : (now - this.at) / 1000;
    // An inspect soon after another (one made at once after a click) gives noise over so
    // short a time: the rates stay those of the last full interval.
    if (this.last && dt < 0.5) return this.last;
    const out = new Map();
    const next = new Map();
    for (const l of info.links || []) {
      const eps = new Map();
      for (const e of l.endpoints || []) {
        const key = `${l.name}|${e.node}:${e.interface}`;
        const cur = { tx: e.tx_bytes, rx: e.rx_bytes, txp: e.tx_packets, rxp: e.rx_packets, drops: (e.drops || 0) + (e.impair_drops || 0) };
        next.set(key, cur);
        const p = this.prev.get(key);
        const r = { tx: 0, rx: 0, txp: 0, rxp: 0, drops: 0 };
        if (p && dt > 0) {
          for (const k of Object.keys(r)) r[k] = Math.max(0, cur[k] - p[k]) / dt;
          r.tx *= 8;
          r.rx *= 8;
        }
        eps.set(`${e.node}:${e.interface}`, r);
      }
      out.set(l.name, eps);
    }
    this.prev = next;
    this.at = now;
    this.last = out;
    return out;
  }
}

// fmtBits writes a rate in bits per second as people read it: 0, 812 b/s, 1.2 Mb/s.
export function fmtBits(bps) {
  if (!bps) return "0";
  const units = ["b/s", "kb/s", "Mb/s", "Gb/s", "Tb/s"];
  let i = 0;
  while (bps >= 1000 && i < units.length - 1) {
    bps /= 1000;
    i++;
  }
  return `${bps >= 100 || i === 0 ? Math.round(bps) : bps.toFixed(1)} ${units[i]}`;
}

// fmtCount writes a per-second count with at most one decimal.
export function fmtCount(n) {
  return n >= 10 || n === 0 ? String(Math.round(n)) : n.toFixed(1);
}
