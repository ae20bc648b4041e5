// The side panel: what is selected (a node or a link), live, with its actions.
import { h } from "./dom.js";
import { fmtBits, fmtCount } from "./rates.js";
import { captureURL, setLinkState } from "./api.js";
import { endpointsOf } from "./model.js";
import { impairmentForm } from "./impair.js";

// nodePanel shows a node: its interfaces and a button that opens a terminal into it.
export function nodePanel(ctx, name) {
  const body = h("div");
  const el = h("div", { class: "panel-node" },
    h("h2", {}, name),
    h("div.actions", {}, h("button", { type: "button", id: "open-terminal", onclick: () => ctx.openTerminal(name) }, "Terminal")),
    body);
  return {
    el,
    refresh(info) {
      const n = (info.nodes || []).find((x) => x.name === name);
      if (!n) {
        body.replaceChildren(h("p.muted", {}, "On another machine: open its page there."));
        return;
      }
      body.replaceChildren(
        h("p", {}, n.running ? `running, pid ${n.pid}` : h("span.bad", {}, "not running")),
        h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "interface"), h("th", {}, "state"), h("th", {}, "addresses"))),
          h("tbody", {}, (n.interfaces || []).map((i) => h("tr", {}, h("td", { title: `${i.mac}, MTU ${i.mtu}` }, i.name),
            h("td", {}, i.state), h("td", {}, (i.addresses || []).join(" ")))))));
    },
  };
}

// linkPanel shows a link: its state (a click takes it, or one endpoint, down or up), each
// endpoint's rates and drops, its impairments, and a capture to download.
export function linkPanel(ctx, link) {
  const msg = h("p.msg");
  const act = async (what, fn) => {
    msg.textContent = `${what}…`;
    msg.className = "msg";
    try {
      await fn();
      msg.textContent = `${what}: done`;
      ctx.refreshSoon();
    } catch (e) {
      msg.textContent = `${what}: ${e.message}`;
      msg.className = "msg bad";
    }
  };
  const stateBtn = h("button", { type: "button", id: "link-toggle" });
  const stateText = h("strong");
  const rows = h("tbody");
  const epSelect = h("select", { name: "endpoint" }, h("option", { value: "" }, "both directions, every endpoint"));
  const info0 = (ctx.info().links || []).find((l) => l.name === link) || { name: link, endpoints: [] };
  for (const e of info0.endpoints || []) epSelect.append(h("option", { value: `${e.node}:${e.interface}` }, `${e.node}:${e.interface} only`));
  const filter = h("input", { name: "filter", placeholder: "filter, e.g. icmp or ospf", size: 22 });
  const count = h("input", { name: "count", type: "number", min: 0, value: 1000, size: 6 });
  const seconds = h("input", { name: "seconds", type: "number", min: 0, step: "any", value: 10, size: 4 });
  const format = h("select", { name: "format" }, h("option", { value: "pcapng" }, "pcapng"), h("option", { value: "pcap" }, "pcap"));
  const download = h("a", { class: "button", id: "capture-download", download: "" }, "Download capture");
  const setHref = () => {
    download.href = captureURL(ctx.net, link, { endpoint: epSelect.value, filter: filter.value.trim(), count: count.value, seconds: seconds.value, format: format.value });
  };
  for (const i of [epSelect, filter, count, seconds, format]) i.addEventListener("input", setHref);
  setHref();
  const impair = h("div");
  const el = h("div", { class: "panel-link" },
    h("h2", {}, link),
    h("p", {}, "State: ", stateText, " ", stateBtn),
    msg,
    h("table", { class: "endpoints" }, h("thead", {}, h("tr", {}, h("th", {}, "endpoint, port"), h("th.num", {}, "sends"), h("th.num", {}, "receives"),
      h("th.num", {}, "frames/s"), h("th.num", {}, "drops/s"))), rows),
    h("h3", {}, "Impairments"), impair,
    h("h3", {}, "Capture"),
    h("form", { class: "capture", onsubmit: (ev) => ev.preventDefault() },
      h("label", {}, "Of ", epSelect), h("label", {}, "Filter ", filter),
      h("label", {}, "Stop after ", count, " frames or ", seconds, " s"), h("label", {}, "Format ", format), download));
  const epRows = new Map();
  let impairShown = "";
  return {
    el,
    refresh(info, rates) {
      const l = (info.links || []).find((x) => x.name === link);
      if (!l) {
        stateText.textContent = "gone";
        return;
      }
      const down = l.state === "down";
      stateText.textContent = down ? "down (no carrier)" : "up";
      stateText.className = down ? "bad" : "good";
      stateBtn.textContent = down ? "Bring up" : "Take down";
      stateBtn.onclick = () => act(down ? "bringing the link up" : "taking the link down", () => setLinkState(ctx.net, link, down));
      const eps = rates.get(link) || new Map();
      for (const ep of endpointsOf(l)) {
        const e = (l.endpoints || []).find((x) => `${x.node}:${x.interface}` === ep);
        let row = epRows.get(ep);
        if (!row) {
          // The endpoint's cell holds its name, and under it its port's state and the button
          // that changes it: the table fits the panel's width.
          row = { name: h("div"), state: h("span"), btn: h("button", { type: "button", class: "small", dataset: { endpoint: ep } }), cells: [0, 1, 2, 3].map(() => h("td.num")) };
          rows.append(h("tr", {}, h("td", {}, row.name, h("div.port", {}, row.state, " ", row.btn)), row.cells));
          epRows.set(ep, row);
        }
        const r = eps.get(ep);
        row.name.textContent = ep;
        if (!e) {
          row.state.textContent = "other machine";
          row.btn.hidden = true;
          continue;
        }
        const epDown = e.state === "down";
        row.state.textContent = epDown ? "down" : e.state;
        row.state.className = epDown ? "bad" : "";
        row.cells[0].textContent = r ? fmtBits(r.tx) : "–";
        row.cells[1].textContent = r ? fmtBits(r.rx) : "–";
        row.cells[2].textContent = r ? `${fmtCount(r.txp)} / ${fmtCount(r.rxp)}` : "–";
        row.cells[3].textContent = r ? fmtCount(r.drops) : "–";
        row.cells[3].title = `shaper ${e.drops}, impairment ${e.impair_drops || 0} in all`;
        row.btn.textContent = epDown ? "bring up" : "take down";
        row.btn.title = epDown ? `give ${ep} its carrier back` : `take ${ep}'s carrier away`;
        row.btn.onclick = () => act(`${ep} ${epDown ? "up" : "down"}`, () => setLinkState(ctx.net, link, epDown, ep));
      }
      const shown = (l.endpoints || []).map((e) => `${e.node}:${e.interface}=${e.impairment || ""}`).join(" ");
      if (shown !== impairShown) {
        impairShown = shown;
        impair.replaceChildren(impairmentForm(ctx, l, act));
      }
    },
  };
}
