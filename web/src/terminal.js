// A terminal into a node: xterm.js over the terminal websocket of the API.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { terminalURL } from "./api.js";

// openTerminal connects a terminal in container to node of net; onEnd is told how it ended.
// It returns a function that closes it.
export function openTerminal(container, net, node, onEnd) {
  const term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000, fontFamily: "ui-monospace, Menlo, Consolas, monospace",
    theme: { background: "#0f1720", foreground: "#e3e8ee" } });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(container);
  fit.fit();
  const ws = new WebSocket(terminalURL(net, node, term.cols, term.rows));
  ws.binaryType = "arraybuffer";
  const enc = new TextEncoder();
  let ended = false;
  const end = (why) => {
    if (ended) return;
    ended = true;
    term.write(`\r\n\x1b[2m[${why}]\x1b[0m\r\n`);
    onEnd(why);
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data !== "string") {
      term.write(new Uint8Array(ev.data));
      return;
    }
    const m = JSON.parse(ev.data);
    if (m.type === "exit") end(`exited with code ${m.code || 0}`);
  };
  ws.onclose = (ev) => end(ev.code === 1000 ? "closed" : `connection closed${ev.reason ? `: ${ev.reason}` : ""}`);
  ws.onerror = () => end("could not connect");
  const input = term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(enc.encode(d)));
  const sendSize = () => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
  const resized = term.onResize(sendSize);
  const observer = new ResizeObserver(() => fit.fit());
  observer.observe(container);
  ws.onopen = () => term.focus();
  window.trellisTerminal = term; // for the browser tests, which read the screen
  return () => {
    observer.disconnect();
    input.dispose();
    resized.dispose();
    ws.close();
    term.dispose();
  };
}
