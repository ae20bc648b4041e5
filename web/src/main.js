// The page of trellis serve: the networks, and for one a live graph with its counters, link
// state, impairments, captures and terminals. Everything comes from the server's API.
import { inspect, listNetworks, openapi } from "./api.js";
import { h } from "./dom.js";
import { Graph } from "./graph.js";
import { model } from "./model.js";
import { Rates } from "./rates.js";
import { linkPanel, nodePanel } from "./panel.js";
import { openTerminal } from "./terminal.js";
import { findImpairmentOp } from "./impair.js";

const $ = (id) => document.getElementById(id);
const started = performance.now();

const app = {
  net: null, // the network shown
  info: null, // its last inspect
  graph: null,
  rates: new Rates(),
  panel: null,
  timer: 0,
  closeTerm: null,
  impairSchema: null,
  // Figures the browser tests read: ms from the script's start to the graph drawn.
  shown: null,
  updates: 0,
  inspectMs: [], // the last inspects' times
  updateMs: [], // the last graph updates' times
};
const keep = (list, v) => {
  list.push(v);
  if (list.length > 20) list.shift();
};
window.trellis = app;

function setStatus(text, bad) {
  $("status").textContent = text;
  $("status").className = bad ? "bad" : "muted";
}

async function refreshNetworks() {
  try {
    const nets = await listNetworks();
    $("netempty").hidden = nets.length > 0;
    $("netlist").replaceChildren(...nets.map((n) => h("li", { class: n.name === app.net ? "current" : "" },
      h("a", { href: `#/n/${encodeURIComponent(n.name)}` }, n.name),
      h("span.muted", {}, ` ${n.nodes} nodes, ${n.links} links${n.status !== "up" ? `, ${n.status}` : ""}`))));
  } catch (e) {
    setStatus(`networks: ${e.message}`, true);
  }
}

// resized tells the graph its box changed (a panel or the terminal opened or closed).
function resized() {
  if (app.graph) app.graph.resize();
}

function select(data) {
  app.panel = null;
  if (!data || data.kind === "machine") {
    $("panel").hidden = true;
    resized();
    return;
  }
  const ctx = { net: app.net, info: () => app.info, openTerminal: termTo, refreshSoon: () => tick(), impairSchema: app.impairSchema };
  app.panel = data.link ? linkPanel(ctx, data.link) : data.name ? nodePanel(ctx, data.name) : null;
  if (!app.panel) {
    $("panel").hidden = true;
    resized();
    return;
  }
  $("panelbody").replaceChildren(app.panel.el);
  $("panel").hidden = false;
  resized();
  app.panel.refresh(app.info, app.lastRates || new Map());
}

// tick inspects the network shown and updates the graph and the panel; it runs every second.
async function tick() {
  clearTimeout(app.timer);
  const net = app.net;
  if (!net) return;
  if (app.busy) {
    app.again = true; // one inspect at a time: the one under way is followed by another at once
    return;
  }
  app.busy = true;
  try {
    await inspectOnce(net);
  } finally {
    app.busy = false;
  }
  if (app.again) {
    app.again = false;
    tick();
  } else if (net === app.net) {
    app.timer = setTimeout(tick, Math.max(200, 1000 - (performance.now() - app.tickAt)));
  }
}

async function inspectOnce(net) {
  const t0 = performance.now();
  try {
    const info = await inspect(net);
    if (net !== app.net) return;
    keep(app.inspectMs, performance.now() - t0);
    const u0 = performance.now();
    app.info = info;
    const rates = app.rates.update(info);
    app.lastRates = rates;
    if (!app.graph) app.graph = new Graph($("graph"), select);
    const m = model(info);
    const laidOut = app.graph.show(m);
    app.graph.update(info, rates);
    if (app.panel) app.panel.refresh(info, rates);
    keep(app.updateMs, performance.now() - u0);
    app.updates++;
    const took = performance.now() - t0;
    $("netinfo").textContent = `${info.name}: ${info.status}, ${info.nodes.length} nodes, ${info.links.length} links${info.host ? ` on ${info.host}` : ""}`;
    if (laidOut && app.shown === null) {
      app.shown = performance.now() - started;
      app.shownNodes = m.nodes.length;
      app.firstInspectMs = app.inspectMs[app.inspectMs.length - 1];
      app.layoutMs = app.graph.layoutMs;
      console.log(`trellis: ${m.nodes.length} nodes shown ${Math.round(app.shown)} ms after the page started`);
    }
    setStatus(`updated ${new Date().toLocaleTimeString()} (inspect ${Math.round(took)} ms)`);
  } catch (e) {
    setStatus(e.message, true);
  }
  app.tickAt = t0;
}

function termTo(node) {
  if (app.closeTerm) app.closeTerm();
  $("drawer").hidden = false;
  $("termtitle").textContent = `${node} in ${app.net}`;
  const box = $("term");
  box.replaceChildren();
  resized();
  app.closeTerm = openTerminal(box, app.net, node, () => {});
}

function closeTerm() {
  if (app.closeTerm) app.closeTerm();
  app.closeTerm = null;
  $("drawer").hidden = true;
  resized();
}

function route() {
  const m = location.hash.match(/^#\/n\/(.+)$/);
  const net = m ? decodeURIComponent(m[1]) : null;
  if (net === app.net) return;
  clearTimeout(app.timer);
  closeTerm();
  app.net = net;
  app.info = null;
  app.rates = new Rates();
  app.panel = null;
  $("panel").hidden = true;
  if (app.graph) {
    app.graph.destroy();
    app.graph = null;
  }
  $("crumb").textContent = net ? ` / ${net}` : "";
  $("toolbar").hidden = !net;
  $("placeholder").hidden = Boolean(net);
  document.title = net ? `${net} – Trellis` : "Trellis";
  refreshNetworks();
  tick();
}

$("fit").onclick = () => app.graph && app.graph.fit();
$("relayout").onclick = () => app.graph && app.graph.layout();
$("panelclose").onclick = () => { app.graph && app.graph.select(null); select(null); };
$("termclose").onclick = closeTerm;
window.addEventListener("hashchange", route);
setInterval(refreshNetworks, 3000);
openapi().then((doc) => { app.impairSchema = findImpairmentOp(doc); }).catch(() => {});
route();
if (!app.net) refreshNetworks();
