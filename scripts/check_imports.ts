/**
 * Fails when the modules of src/ import against the layering of src/README.md: in a circle (type-only imports
 * included: a circle is coupling whatever the compiler erases), or from a lower layer to a higher one, or when a
 * module is in no layer, or src/_types.ts imports anything. Reads every `import … from "./x.ts"` and
 * `export … from "./x.ts"` of src/**\/*.ts and the numbered list of src/README.md (each item a layer, naming its
 * modules in backticks); prints one line per problem (a circle as `a.ts -> b.ts -> a.ts`) and exits 1; otherwise
 * prints "imports: <n> modules in <m> layers, no circle".
 *
 *   node --import tsx scripts/check_imports.ts
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src");

/** Every .ts file below `dir`, as absolute paths. */
const files = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts")).map((f) => join(dir, f));

// A static import or re-export of a relative module, over several lines if need be (up to its `from`). Comment
// lines (JSDoc examples) start with `*` or `//`, so they never match at the start of a line.
const IMPORT = /^(?:import|export)\b[^;"]*?\bfrom\s*"(\.{1,2}\/[^"]+)"/gm;

const name = (file: string) => relative(src, file).replaceAll("\\", "/");
const graph = new Map<string, string[]>();
for (const file of files(src).sort()) {
  const text = readFileSync(file, "utf8");
  const deps = new Set<string>();
  for (const m of text.matchAll(IMPORT)) deps.add(name(resolve(dirname(file), m[1])));
  graph.set(name(file), [...deps].sort());
}

const problems: string[] = [];
for (const dep of graph.get("_types.ts") ?? []) problems.push(`_types.ts must import nothing, but imports ${dep}`);

// The layers: "N. … `module.ts` …" items of src/README.md, an item running on over its indented lines.
const layer = new Map<string, number>();
let current = 0;
for (const line of readFileSync(join(src, "README.md"), "utf8").split("\n")) {
  const item = /^(\d+)\. /.exec(line);
  if (item) current = Number(item[1]);
  else if (!/^\s+\S/.test(line)) current = 0;
  if (current === 0) continue;
  for (const m of line.matchAll(/`([\w/.-]+\.ts)`/g)) layer.set(m[1], current);
}
for (const [mod, deps] of graph) {
  const at = layer.get(mod);
  if (at === undefined) {
    problems.push(`${mod} is in no layer of src/README.md: add it to the one it belongs to`);
    continue;
  }
  for (const dep of deps) {
    const to = layer.get(dep);
    if (to !== undefined && to > at) problems.push(`${mod} (layer ${at}) imports ${dep} (layer ${to}), a higher layer`);
  }
}
for (const mod of layer.keys()) if (!graph.has(mod)) problems.push(`src/README.md lists ${mod}, not a module of src/`);

// Depth-first search; a back edge to a module on the current path closes a circle. Each circle is reported once,
// from its smallest module name.
const state = new Map<string, "open" | "done">();
const path: string[] = [];
const seen = new Set<string>();
function visit(mod: string): void {
  state.set(mod, "open");
  path.push(mod);
  for (const dep of graph.get(mod) ?? []) {
    if (!graph.has(dep)) problems.push(`${mod} imports ${dep}, which is not a module of src/`);
    else if (state.get(dep) === "open") {
      const circle = path.slice(path.indexOf(dep));
      const start = circle.indexOf([...circle].sort()[0]);
      const key = [...circle.slice(start), ...circle.slice(0, start)];
      const line = [...key, key[0]].join(" -> ");
      if (!seen.has(line)) {
        seen.add(line);
        problems.push(`import circle: ${line}`);
      }
    } else if (!state.has(dep)) visit(dep);
  }
  path.pop();
  state.set(mod, "done");
}
for (const mod of graph.keys()) if (!state.has(mod)) visit(mod);

if (problems.length > 0) {
  for (const p of problems) console.error(p);
  process.exit(1);
}
console.log(`imports: ${graph.size} modules in ${new Set(layer.values()).size} layers, no circle`);
