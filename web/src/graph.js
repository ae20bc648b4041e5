// The live graph: cytoscape.js on a canvas, laid out once per shape of the network, its
// edges' labels and widths updated from each second's rates.
import cytoscape from "cytoscape";
import { fmtBits, fmtCount } from "./rates.js";
import { signature } from "./model.js";
import { groupedLayout } from "./layout.js";

const style = [
  { selector: "node", style: {
    shape: "round-rectangle", width: "label", height: 22, padding: "6px", label: "data(label)",
    "text-valign": "center", "font-size": 12, "font-family": "system-ui, sans-serif", color: "#12263a",
    "background-color": "#dcefe4", "border-width": 1.5, "border-color": "#2f8f5b", "min-zoomed-font-size": 6 } },
  { selector: "node.stopped", style: { "background-color": "#eee", "border-color": "#999", color: "#777" } },
  { selector: "node.remote", style: { "border-style": "dashed", "background-color": "#f3f6fa", "border-color": "#7b8da3" } },
  { selector: "node.hub", style: { shape: "diamond", width: 18, height: 18, padding: 0, label: "data(label)", "text-valign": "bottom",
    "text-margin-y": 4, "font-size": 10, "background-color": "#cfe0f5", "border-color": "#3a6ea5" } },
  { selector: "node.machine", style: { shape: "round-rectangle", label: "data(label)", "text-valign": "top", "text-halign": "center",
    "font-size": 13, "font-weight": "bold", "background-color": "#f7f9fc", "background-opacity": 0.6, "border-color": "#9fb3c8",
    "border-style": "dashed", padding: "18px" } },
  { selector: "edge", style: {
    width: "data(w)", "line-color": "#6b7f95", "curve-style": "bezier", "font-size": 9, "font-family": "system-ui, sans-serif",
    "source-label": "data(sl)", "target-label": "data(tl)", label: "data(ml)", "source-text-offset": 34, "target-text-offset": 34,
    "text-background-color": "#fff", "text-background-opacity": 0.8, "text-background-padding": "1px", color: "#334",
    "min-zoomed-font-size": 7 } },
  { selector: "edge.busy", style: { "line-color": "#2b7bd6" } },
  { selector: "edge.dropping", style: { "line-color": "#e08a00", color: "#b35c00" } },
  { selector: "edge.down", style: { "line-color": "#d33", "line-style": "dashed", color: "#d33" } },
  { selector: ":selected", style: { "overlay-color": "#2b7bd6", "overlay-opacity": 0.18, "overlay-padding": 6 } },
];

// Graph draws one network at a time in container.
export class Graph {
  constructor(container, onSelect) {
    this.cy = cytoscape({ container, style, wheelSensitivity: 0.3, minZoom: 0.005, maxZoom: 4,
      boxSelectionEnabled: false, textureOnViewport: true, motionBlur: false });
    this.sig = "";
    this.userMoved = false; // the user zoomed or panned: the view is theirs, not refitted
    this.cy.on("dragpan scrollzoom pinchzoom", () => { this.userMoved = true; });
    this.cy.on("tap", "node, edge", (ev) => onSelect(ev.target.data()));
    this.cy.on("tap", (ev) => { if (ev.target === this.cy) onSelect(null); });
  }

  // show draws model m, laid out anew if its shape differs from the one shown; it returns
  // whether it did lay it out.
  show(m) {
    const sig = signature(m);
    const kinds = new Map(m.nodes.map((n) => [n.id, n.kind]));
    if (sig === this.sig) {
      this.cy.batch(() => this.cy.nodes().forEach((n) => { if (kinds.has(n.id())) n.classes(kinds.get(n.id())); }));
      return false;
    }
    this.sig = sig;
    const els = [
      ...m.groups.map((g) => ({ group: "nodes", data: g, classes: g.kind })),
      ...m.nodes.map((n) => ({ group: "nodes", data: n, classes: n.kind })),
      ...m.edges.map((e) => ({ group: "edges", data: { ...e, w: 1.5, sl: "", tl: "", ml: "" } })),
    ];
    this.cy.batch(() => {
      this.cy.elements().remove();
      this.cy.add(els);
    });
    this.layout();
    return true;
  }

  // layout places the nodes (each machine's apart, side by side) and fits them in the window.
  layout() {
    const l0 = performance.now();
    this.cy.resize();
    const nodes = this.cy.nodes().not(".machine").map((n) => ({ id: n.id(), parent: n.data("parent") }));
    const edges = this.cy.edges().map((e) => [e.source().id(), e.target().id()]);
    // Links long enough for their two rate labels when there are few; shorter beyond.
    const pos = groupedLayout(nodes, edges, { k: nodes.length <= 40 ? 160 : 80 });
    this.cy.layout({ name: "preset", positions: (n) => pos[n.id()], fit: false, animate: false }).run();
    this.fit();
    this.layoutMs = performance.now() - l0;
  }

  // fit shows the whole graph, magnified no more than 1.4 times (a few nodes would fill the
  // window otherwise).
  fit() {
    this.userMoved = false;
    this.cy.fit(this.cy.nodes(), 30); // nodes only: edge labels may not be placed yet
    if (this.cy.zoom() > 1.4) {
      this.cy.zoom(1.4);
      this.cy.center();
    }
  }

  // update sets each edge's labels, width and colour from the rates of its link, and its
  // state from the inspect's links.
  update(info, rates) {
    const links = new Map((info.links || []).map((l) => [l.name, l]));
    this.cy.batch(() => {
      this.cy.edges().forEach((edge) => {
        const d = edge.data();
        const l = links.get(d.link);
        const eps = rates.get(d.link) || new Map();
        const ra = d.a ? eps.get(d.a) : undefined;
        const rb = d.b ? eps.get(d.b) : undefined;
        const down = l && (l.state === "down" || (l.endpoints || []).some((e) => e.state === "down"));
        // Source end: what the source sends; target end: what the target sends (for an edge
        // to a hub, what the source receives from the LAN).
        const sl = ra ? fmtBits(ra.tx) : "";
        const tl = rb ? fmtBits(rb.tx) : ra && !d.b ? fmtBits(ra.rx) : "";
        const drops = (ra ? ra.drops : 0) + (rb ? rb.drops : 0);
        const max = Math.max(ra ? ra.tx : 0, rb ? rb.tx : 0, ra ? ra.rx : 0);
        const ml = down ? "down" : drops > 0 ? `${fmtCount(drops)} drops/s` : "";
        const cls = down ? "down" : drops > 0 ? "dropping" : max > 0 ? "busy" : "";
        edge.data({ sl: down ? "" : sl, tl: down ? "" : tl, ml, w: 1.5 + Math.min(8, Math.log10(1 + max / 1000)) });
        edge.classes(cls);
      });
    });
  }

  // resize takes the container's new size, and fits the graph to it unless the user moved it.
  resize() {
    this.cy.resize();
    if (!this.userMoved) this.fit();
  }

  select(id) {
    this.cy.$(":selected").unselect();
    if (id) this.cy.getElementById(id).select();
  }

  destroy() { this.cy.destroy(); }
}
