// Calls to the trellis API of the server that served the page.

// ApiError carries the problem (RFC 9457) the API answered with.
export class ApiError extends Error {
  constructor(status, problem) {
    const details = (problem.errors || []).map((e) => e.message).filter(Boolean);
    super([problem.detail || problem.title || `HTTP ${status}`, ...details].join(": "));
    this.status = status;
  }
}

async function call(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  if (resp.status === 204) return null;
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

const seg = encodeURIComponent;

export const listNetworks = () => call("GET", "/networks").then((d) => d.networks);
export const inspect = (net) => call("GET", `/networks/${seg(net)}`);
export const setLinkState = (net, link, up, endpoint) =>
  call("PUT", `/networks/${seg(net)}/links/${seg(link)}/state`, endpoint ? { state: up ? "up" : "down", endpoint } : { state: up ? "up" : "down" });
export const openapi = () => call("GET", "/openapi.json");
export const put = (path, body) => call("PUT", path, body);

// captureURL is the download address of a capture of a link.
export function captureURL(net, link, opts) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(opts)) if (v !== "" && v !== undefined && v !== null) q.set(k, v);
  return `/networks/${seg(net)}/links/${seg(link)}/capture?${q}`;
}

// terminalURL is the websocket address of a terminal into a node.
export function terminalURL(net, node, cols, rows) {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${location.host}/networks/${seg(net)}/nodes/${seg(node)}/terminal?cols=${cols}&rows=${rows}`;
}
