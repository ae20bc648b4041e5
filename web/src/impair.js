// Impairments of a link: shown as the file writes them, and editable when the server offers
// an operation to set them (PUT /networks/{network}/links/{link}/impairments), with a form
// made from the request body's schema in the OpenAPI document.
import { h } from "./dom.js";
import { put } from "./api.js";

export const impairmentsPath = "/networks/{network}/links/{link}/impairments";

// findImpairmentOp returns the body schema of the impairments operation, or null when the
// server has none.
export function findImpairmentOp(doc) {
  const op = doc && doc.paths && doc.paths[impairmentsPath] && doc.paths[impairmentsPath].put;
  if (!op || !op.requestBody) return null;
  let schema = (op.requestBody.content["application/json"] || {}).schema;
  const ref = schema && schema.$ref;
  if (ref && ref.startsWith("#/components/schemas/")) schema = doc.components.schemas[ref.slice("#/components/schemas/".length)];
  return schema && schema.properties ? schema : null;
}

function field(name, s) {
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type;
  const attrs = { name, title: s.description || "" };
  if (type === "boolean") return { input: h("input", { ...attrs, type: "checkbox" }), read: (i) => i.checked };
  if (s.enum) return { input: h("select", attrs, h("option", { value: "" }, ""), s.enum.map((v) => h("option", { value: v }, v))), read: (i) => i.value || undefined };
  if (type === "integer" || type === "number") {
    return { input: h("input", { ...attrs, type: "number", step: "any", min: s.minimum, max: s.maximum, size: 6 }), read: (i) => (i.value === "" ? undefined : Number(i.value)) };
  }
  return { input: h("input", { ...attrs, size: 12, placeholder: s.examples ? String(s.examples[0]) : "" }), read: (i) => i.value.trim() || undefined };
}

// impairmentForm shows link l's impairments and, if the server can set them, a form.
export function impairmentForm(ctx, l, act) {
  const now = (l.endpoints || []).filter((e) => e.impairment).map((e) => h("li", {}, `${e.node}:${e.interface} sends with ${e.impairment}`));
  const shown = now.length ? h("ul", {}, now) : h("p.muted", {}, "none");
  const schema = ctx.impairSchema;
  if (!schema) {
    return h("div", {}, shown, h("p.muted", {}, "Set them in the topology file and apply it with trellis up (this server has no impairments operation)."));
  }
  const fields = Object.entries(schema.properties).map(([name, s]) => [name, field(name, s)]);
  const submit = (ev) => {
    ev.preventDefault();
    const body = {};
    for (const [name, f] of fields) {
      const v = f.read(f.input);
      if (v !== undefined) body[name] = v;
    }
    const path = impairmentsPath.replace("{network}", encodeURIComponent(ctx.net)).replace("{link}", encodeURIComponent(l.name));
    act("setting impairments", () => put(path, body));
  };
  return h("div", {}, shown,
    h("form", { class: "impair", onsubmit: submit }, fields.map(([name, f]) => h("label", {}, `${name} `, f.input)),
      h("button", { type: "submit" }, "Set")));
}
