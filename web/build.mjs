// Bundles the page into ../internal/web/dist, which the trellis binary embeds (go:embed).
// Run by scripts/web-build.sh; the output is committed, so `go build` needs no npm.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

const out = "../internal/web/dist";
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const common = { bundle: true, minify: true, legalComments: "linked", logLevel: "warning" };
await build({ ...common, entryPoints: ["src/main.js"], outfile: `${out}/app.js`, format: "iife", target: "es2020" });
await build({ ...common, entryPoints: ["src/style.css"], outfile: `${out}/app.css` });
copyFileSync("index.html", `${out}/index.html`);
