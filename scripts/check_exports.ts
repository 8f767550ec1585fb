/**
 * Fails when the package's entry points disagree: the subpaths of package.json "exports", of deno.json
 * "exports" and of the tsup entries (tsup.config.ts) must be the same, each deno.json export must be the tsup
 * entry's source, each package.json export must point at that entry's build output, and every source must
 * exist. One line per difference, exit 1; otherwise prints "exports match: <subpaths>".
 *
 *   node --import tsx scripts/check_exports.ts
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { entries } from "../tsup.config.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const readJson = (file: string) => JSON.parse(readFileSync(join(root, file), "utf8"));
const pkg = readJson("package.json");
const deno = readJson("deno.json");

const problems: string[] = [];
const subpathOf = (name: string) => name === "mod" ? "." : `./${name}`;
const norm = (p: string) => p.replace(/^\.\//, "");

// subpath → source (tsup), → target (deno.json), → conditions (package.json)
const tsup = new Map(Object.entries(entries).map(([name, src]) => [subpathOf(name), { name, src }]));
const denoExports: Record<string, string> = typeof deno.exports === "string"
  ? { ".": deno.exports }
  : deno.exports ?? {};
const pkgExports: Record<string, unknown> = pkg.exports ?? {};
const pkgSubpaths = Object.keys(pkgExports).filter((s) => s !== "./package.json");

const lists: Array<[string, Set<string>]> = [
  ["package.json exports", new Set(pkgSubpaths)],
  ["deno.json exports", new Set(Object.keys(denoExports))],
  ["tsup entries (tsup.config.ts)", new Set(tsup.keys())],
];
const all = [...new Set(lists.flatMap(([, s]) => [...s]))];
for (const subpath of all) {
  const inList = lists.filter(([, s]) => s.has(subpath)).map(([label]) => label);
  const notIn = lists.filter(([, s]) => !s.has(subpath)).map(([label]) => label);
  if (notIn.length > 0) problems.push(`${subpath}: in ${inList.join(" and ")} but not in ${notIn.join(" or ")}`);
}

/** The conditions every package.json subpath must have, pointing at the build of tsup entry `name`. */
function expectedConditions(name: string): Record<string, Record<string, string>> {
  return {
    import: { types: `./dist/${name}.d.ts`, default: `./dist/${name}.js` },
    require: { types: `./dist/${name}.d.cts`, default: `./dist/${name}.cjs` },
  };
}

for (const [subpath, { name, src }] of tsup) {
  if (!existsSync(join(root, src))) problems.push(`${subpath}: tsup entry source ${src} does not exist`);
  const denoTarget = denoExports[subpath];
  if (denoTarget !== undefined && norm(denoTarget) !== norm(src)) {
    problems.push(`${subpath}: deno.json exports ${denoTarget} but the tsup entry is ${src}`);
  }
  const actual = pkgExports[subpath] as Record<string, Record<string, string> | string> | undefined;
  if (actual === undefined) continue;
  for (const [condition, want] of Object.entries(expectedConditions(name))) {
    for (const [inner, file] of Object.entries(want)) {
      const got = typeof actual === "object" && actual !== null && typeof actual[condition] === "object"
        ? (actual[condition] as Record<string, string>)[inner]
        : undefined;
      if (got !== file) {
        problems.push(
          `${subpath}: package.json exports["${subpath}"].${condition}.${inner} is ${
            got ?? "missing"
          }, expected ${file}`,
        );
      }
    }
  }
}
for (const [subpath, target] of Object.entries(denoExports)) {
  if (!tsup.has(subpath) && !existsSync(join(root, target))) {
    problems.push(`${subpath}: deno.json export ${target} does not exist`);
  }
}

// The legacy top-level fields and the published files must agree with the "." entry.
const mod = expectedConditions("mod");
for (
  const [field, want] of [["main", mod.require.default], ["module", mod.import.default], ["types", mod.import.types]]
) {
  if (pkg[field] !== want) problems.push(`package.json "${field}" is ${pkg[field] ?? "missing"}, expected ${want}`);
}
if (pkgExports["./package.json"] !== "./package.json") {
  problems.push(`package.json exports["./package.json"] is missing or not "./package.json"`);
}
if (!Array.isArray(pkg.files) || !pkg.files.includes("dist")) {
  problems.push(`package.json "files" does not include dist`);
}

if (problems.length > 0) {
  for (const p of problems) console.error(`exports differ: ${p}`);
  process.exit(1);
}
console.log(`exports match: ${[...tsup.keys()].join(", ")}`);
