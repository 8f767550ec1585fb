/**
 * The API reference, generated from the JSDoc: `deno doc --html` of every entry point of deno.json "exports" (the
 * same entries as the npm package's), then a check that every relative link of the generated HTML (`href`, `src`)
 * names a file that was written, and its `#anchor`, if any, an `id` in that file. Fails if the build fails, writes
 * nothing, or leaves a link dangling. Takes about a second; `npm test` runs it (into a temporary folder).
 *
 *   node --import tsx scripts/api_docs.ts [--out DIR]
 *
 * --out DIR: write the reference there and keep it (`npm run docs:api` writes docs/api/, which git ignores; open
 * docs/api/index.html). Without it, the reference goes to a temporary folder, removed after the check.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const outAt = args.indexOf("--out");
if (args.some((a) => a.startsWith("-") && a !== "--out") || (outAt >= 0 && !args[outAt + 1])) {
  console.error("usage: node --import tsx scripts/api_docs.ts [--out DIR]");
  process.exit(2);
}
const keep = outAt >= 0;
const out = keep ? resolve(args[outAt + 1]) : mkdtempSync(join(tmpdir(), "redlease-api-"));
if (!keep) process.on("exit", () => rmSync(out, { recursive: true, force: true }));
else rmSync(out, { recursive: true, force: true });

const entries: string[] = Object.values(JSON.parse(readFileSync(join(root, "deno.json"), "utf8")).exports);
const t0 = performance.now();
const built = spawnSync(
  join(root, "node_modules", ".bin", "deno"),
  ["doc", "--html", "--name=redlease", `--output=${out}`, ...entries],
  { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } },
);
if (built.status !== 0) {
  console.error(`deno doc --html failed (exit code ${built.status}):\n${built.stdout}${built.stderr}`);
  process.exit(1);
}

const files = existsSync(out) ? readdirSync(out, { recursive: true, encoding: "utf8" }).map((f) => join(out, f)) : [];
const pages = files.filter((f) => f.endsWith(".html"));
const problems: string[] = [];
if (!pages.includes(join(out, "index.html"))) problems.push(`no index.html in ${out}`);

const idsOf = new Map<string, Set<string>>();
const ids = (file: string) => {
  if (!idsOf.has(file)) {
    const html = readFileSync(file, "utf8");
    idsOf.set(file, new Set([...html.matchAll(/\s(?:id|name)="([^"]*)"/g)].map((m) => decodeEntities(m[1]))));
  }
  return idsOf.get(file)!;
};

let links = 0;
let quirks = 0;

/**
 * Anchors that deno doc (2.x) itself writes without their target, whatever the JSDoc says: `#example_N` (its
 * example headings' ids are `examples`, `examples-1`, …) and `#method_NAME_N` / `#property_NAME_N` where the page
 * numbers NAME's id by its position instead (`method_NAME_M`). Counted and reported, not failed: every other anchor
 * must resolve.
 */
function generatorQuirk(anchor: string, targetIds: ReadonlySet<string>): boolean {
  if (/^example_\d+(?:-\d+)?$/.test(anchor)) return true;
  const member = /^((?:method|property|accessor|call_signature|index_signature)_.+)_\d+$/.exec(anchor);
  return member !== null && [...targetIds].some((id) => id.startsWith(`${member[1]}_`));
}
for (const page of pages) {
  const html = readFileSync(page, "utf8");
  for (const m of html.matchAll(/\s(?:href|src)="([^"]*)"/g)) {
    const target = decodeEntities(m[1]);
    // Absolute URLs (https:, data:, javascript:), protocol-relative ones and query-only links are not files here.
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//") || target.startsWith("?")) continue;
    links++;
    const [path, anchor] = target.split("#", 2) as [string, string | undefined];
    let to = path === "" ? page : resolve(dirname(page), decodeURIComponent(path.split("?")[0]));
    const at = `${relative(out, page)}: the link '${target}'`;
    if (existsSync(to) && statSync(to).isDirectory()) to = join(to, "index.html");
    if (!existsSync(to)) {
      problems.push(`${at} names no file`);
      continue;
    }
    if (anchor && to.endsWith(".html") && !ids(to).has(decodeURIComponent(anchor))) {
      if (generatorQuirk(decodeURIComponent(anchor), ids(to))) quirks++;
      else problems.push(`${at} names no id of ${relative(out, to)}`);
    }
  }
}

function decodeEntities(s: string): string {
  return s.replace(/&#x([0-9a-f]+);/gi, (_, h) => String.fromCodePoint(parseInt(h, 16)))
    .replace(/&#([0-9]+);/g, (_, d) => String.fromCodePoint(Number(d)))
    .replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");
}

for (const p of problems.slice(0, Number(process.env.API_DOCS_SHOW ?? 50))) console.error(p);
if (problems.length > 50) console.error(`… and ${problems.length - 50} more`);
console.log(
  `API reference: ${entries.length} entry points, ${pages.length} pages, ${links} relative links checked (${quirks} ` +
    `anchors of deno doc's own numbering tolerated) in ${((performance.now() - t0) / 1000).toFixed(1)} s${
      keep ? `; written to ${relative(process.cwd(), out) || "."}` : ""
    }${problems.length ? `; ${problems.length} problem(s)` : ""}`,
);
process.exit(problems.length === 0 ? 0 : 1);
