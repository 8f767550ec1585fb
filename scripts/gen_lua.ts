/**
 * Generates `src/_scripts.ts` from `lua/*.lua` so the runtime never reads files: each script's text and its SHA1,
 * computed here at build time, not at run time; and the protocol's numbers of lua/_constants.lua as TypeScript
 * constants. A script's text is its file with:
 *   - `-- @include _x.lua` lines replaced by what of _x.lua the script has not yet (each helper once; a helper file
 *     may include what it needs), or only some of its helpers: `-- @include _x.lua (a, b)` (see load());
 *   - each call of a helper marked `-- @inline` replaced by the helper's expression (see inline());
 *   - the helpers and constants it never names dropped (see script());
 *   - comments and whitespace removed (see compact()).
 * So a helper costs a script nothing where it is not used: Redis makes a closure for each `local function` on every
 * call that runs its definition, about 0.2 µs each (bench/scripts_cost.ts).
 *
 * The numbers are defined in Lua and generated into TypeScript, not the other way round: this script already reads
 * the Lua and writes the TypeScript, so it needs no TypeScript parser and does not import src/ (which imports the
 * very file it writes: a stale or broken src/_scripts.ts would then break the command that repairs it). With
 * `--check` it also fails when a script spells out one of those numbers instead of naming it.
 *
 *   node --import tsx scripts/gen_lua.ts          write src/_scripts.ts
 *   node --import tsx scripts/gen_lua.ts --check  exit 1 if src/_scripts.ts is stale
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const luaDir = join(root, "lua");
const out = join(root, "src", "_scripts.ts");

/**
 * The script's text with its includes inlined. `-- @include _x.lua` brings what of _x.lua the script has not yet:
 * its other lines (comments, constants, its own includes) at the first include of the file, and then each of its
 * helpers (a top-level `local function name(` up to its `end` at the start of a line) once.
 * `-- @include _x.lua (a, b)` brings only the helpers a and b (and those of _x.lua they call): a script includes
 * early what its cheap path needs, and the rest after it (a helper costs a closure on every call that reaches its
 * definition). `seen` holds the files and `file:helper`s inlined.
 */
function load(file: string, seen = new Set<string>(), only?: string[]): string {
  const text = readFileSync(join(luaDir, file), "utf8");
  const expand = (t: string) =>
    t.replace(
      /^-- @include (\S+?)(?: \(([\w, ]+)\))?\n/gm,
      (_, inc: string, names?: string) => load(inc, seen, names?.split(",").map((n) => n.trim())),
    );
  if (!file.startsWith("_")) return expand(text);
  // The helper file in parts: its helpers by name, in order, and the rest.
  const lines = text.split("\n"), helpers: Array<{ name: string; text: string }> = [], rest: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const def = /^local function (\w+)\(/.exec(lines[i]);
    if (!def) {
      rest.push(lines[i]);
      continue;
    }
    const end = /\bend$/.test(lines[i]) ? i : lines.indexOf("end", i);
    helpers.push({ name: def[1], text: lines.slice(i, end + 1).join("\n") + "\n" });
    i = end;
  }
  // The helpers asked for, and those of this file they call (which come before them, as Lua's locals must).
  const wanted = new Set(only ?? helpers.map((h) => h.name));
  for (let grew = true; grew;) {
    grew = false;
    for (const h of helpers) {
      if (!wanted.has(h.name)) continue;
      for (const other of helpers) {
        if (!wanted.has(other.name) && new RegExp(`\\b${other.name}\\(`).test(h.text)) {
          wanted.add(other.name);
          grew = true;
        }
      }
    }
  }
  for (const name of wanted) {
    if (!helpers.some((h) => h.name === name)) throw new Error(`${file} has no helper ${name}`);
  }
  let out = "";
  if (!seen.has(file)) {
    seen.add(file);
    out += expand(rest.join("\n").replace(/\n*$/, "\n"));
  }
  for (const h of helpers) {
    if (!wanted.has(h.name) || seen.has(`${file}:${h.name}`)) continue;
    seen.add(`${file}:${h.name}`);
    out += h.text;
  }
  return out;
}

/**
 * The numbers of lua/_constants.lua: each `local NAME = <integer>` line, with the comment lines just above it (its
 * documentation, which the TypeScript constant carries as JSDoc).
 */
function constants(): Array<{ name: string; value: string; doc: string[] }> {
  const found: Array<{ name: string; value: string; doc: string[] }> = [];
  let doc: string[] = [];
  for (const line of readFileSync(join(luaDir, "_constants.lua"), "utf8").split("\n")) {
    const def = /^local ([A-Z][A-Z0-9_]*) = (\d+)$/.exec(line);
    if (def) found.push({ name: def[1], value: def[2], doc });
    doc = line.startsWith("-- ") ? [...doc, line.slice(3)] : [];
  }
  return found;
}

/**
 * The text shipped to Redis: whole-line comments dropped, and outside string literals every run of whitespace
 * removed, or kept as one space where two words (or a word and `.`, as in `1 ..`) would otherwise merge, or
 * where `- -` or `[ [` would start a comment or a long string. The .lua
 * files keep their documentation; the bundle stays small. The scripts have only whole-line comments and no `--`
 * or newline inside a string literal.
 */
function compact(source: string): string {
  const code = source.split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("--")).join("\n");
  const word = /[A-Za-z0-9_.]/;
  let out = "";
  let quote = "";
  for (let i = 0; i < code.length; i++) {
    const ch = code[i];
    if (quote) {
      out += ch;
      if (ch === "\\") out += code[++i];
      else if (ch === quote) quote = "";
    } else if (/\s/.test(ch)) {
      let j = i;
      while (j + 1 < code.length && /\s/.test(code[j + 1])) j++;
      const a = out.at(-1) ?? "", b = code[j + 1] ?? "";
      // A space also stays between "-" "-" (a comment) and "[" "[" (a long string).
      if ((word.test(a) && word.test(b)) || (a === b && (a === "-" || a === "["))) out += " ";
      i = j;
    } else {
      if (ch === "'" || ch === '"') quote = ch;
      out += ch;
    }
  }
  return out + "\n";
}

const names = readdirSync(luaDir).filter((f) => f.endsWith(".lua") && !f.startsWith("_")).sort();
const numbers = constants();
let body = `// Generated by scripts/gen_lua.ts from lua/*.lua. Do not edit; run \`npm run gen\`.\n\n`;
for (const c of numbers) {
  body += `/**\n${c.doc.map((l) => ` * ${l}\n`).join("")} */\nexport const ${c.name} = ${c.value};\n`;
}
body += `\n`;
body += `/** A Lua script with the SHA1 that SCRIPT LOAD returns for it. */\n`;
body +=
  `export interface Script {\n  readonly name: string;\n  readonly sha: string;\n  readonly source: string;\n}\n\n`;
/**
 * The helpers marked `-- @inline` (the line above their `local function`) in lua/_*.lua: a body of one `return`
 * expression, which is put in place of each call (see inline()).
 */
function inlineHelpers(): Map<string, { params: string[]; expr: string; file: string }> {
  const found = new Map<string, { params: string[]; expr: string; file: string }>();
  for (const file of readdirSync(luaDir).filter((f) => f.startsWith("_") && f.endsWith(".lua"))) {
    const text = readFileSync(join(luaDir, file), "utf8");
    for (const m of text.matchAll(/^-- @inline\nlocal function (\w+)\(([^)]*)\)\n((?: {2}.*\n)+?)end$/gm)) {
      const body = m[3].split("\n").map((l) => l.trim()).filter((l) => l !== "").join(" ");
      if (!body.startsWith("return ") || body.includes("--")) {
        throw new Error(`lua/${file}: ${m[1]} is marked @inline but its body is not one return expression`);
      }
      found.set(m[1], { params: m[2].split(",").map((p) => p.trim()), expr: body.slice(7), file });
    }
  }
  return found;
}
const inlined = inlineHelpers();

/** The end (exclusive) of the string literal that starts at `i`. */
function stringEnd(code: string, i: number): number {
  const quote = code[i];
  let j = i + 1;
  while (j < code.length && code[j] !== quote) j += code[j] === "\\" ? 2 : 1;
  return j + 1;
}

/** The index of the parenthesis that closes the one at `open` (strings skipped). */
function closing(code: string, open: number): number {
  let depth = 0;
  for (let j = open; j < code.length; j++) {
    if (code[j] === "'" || code[j] === '"') j = stringEnd(code, j) - 1;
    else if (code[j] === "(") depth++;
    else if (code[j] === ")" && --depth === 0) return j;
  }
  return -1;
}

/**
 * Whether the word at `i` of `code` is a field or method name (after `.` or `:`, or part of a longer word) rather
 * than a name of its own: `x.dly` and `x:dly` are fields, but in `'d'..dly` the `..` is concatenation.
 */
function notAName(code: string, i: number): boolean {
  const before = code[i - 1] ?? "";
  return /[\w:]/.test(before) || (before === "." && code[i - 2] !== ".");
}

/** `expr` with each of `params` (a name, not a field after `.` or `:`) replaced by its argument. */
function substitute(expr: string, params: string[], args: string[]): string {
  let out = "";
  for (let i = 0; i < expr.length;) {
    if (expr[i] === "'" || expr[i] === '"') {
      const j = stringEnd(expr, i);
      out += expr.slice(i, j);
      i = j;
      continue;
    }
    const word = /^[A-Za-z_]\w*/.exec(expr.slice(i));
    if (word && !notAName(expr, i)) {
      const k = params.indexOf(word[0]);
      out += k >= 0 ? args[k] : word[0];
      i += word[0].length;
      continue;
    }
    out += expr[i++];
  }
  return out;
}

/**
 * The script's text with every call of an `@inline` helper replaced by the helper's expression, its parameters
 * replaced by the call's arguments: a helper on a cheap path then costs no closure (one per call of the script,
 * which is what a helper costs there). An argument must be a name, a field (`w.last`, `ARGV[2]`, `KEYS[i]`) or a literal, so
 * that using it more than once evaluates nothing twice; the expression is parenthesised unless it is itself a call
 * (which may then stand as a statement).
 */
function inline(file: string, code: string): string {
  const simple =
    /^(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[(?:\d+|[A-Za-z_]\w*)\])*|\d+|'[^'\\]*'|"[^"\\]*"|nil|true|false)$/;
  let out = "";
  for (let i = 0; i < code.length;) {
    const ch = code[i];
    if (ch === "'" || ch === '"') {
      const j = stringEnd(code, i);
      out += code.slice(i, j);
      i = j;
      continue;
    }
    if (code.startsWith("--", i)) {
      const j = code.indexOf("\n", i);
      out += code.slice(i, j < 0 ? code.length : j);
      i = j < 0 ? code.length : j;
      continue;
    }
    const call = /^([A-Za-z_]\w*)\(/.exec(code.slice(i));
    if (call && inlined.has(call[1]) && !notAName(code, i) && !/function\s+$/.test(out)) {
      const h = inlined.get(call[1])!;
      // The arguments, split at the commas outside parentheses, brackets, braces and strings.
      const args: string[] = [];
      let depth = 0, j = i + call[0].length, start = j;
      for (; j < code.length; j++) {
        const c = code[j];
        if (c === "'" || c === '"') j = stringEnd(code, j) - 1;
        else if ("([{".includes(c)) depth++;
        else if (")]}".includes(c) && depth > 0) depth--;
        else if (c === ")" || (c === "," && depth === 0)) {
          args.push(code.slice(start, j).trim());
          start = j + 1;
          if (c === ")") break;
        }
      }
      for (const a of args) {
        if (!simple.test(a)) {
          throw new Error(
            `lua/${file}: ${call[1]}(${args.join(", ")}): an inlined helper takes names and literals only`,
          );
        }
      }
      while (args.length < h.params.length) args.push("nil");
      const expr = substitute(h.expr, h.params, args);
      const isCall = /^[\w.]+\(/.test(h.expr) && closing(h.expr, h.expr.indexOf("(")) === h.expr.length - 1;
      // Expanded again: the expression may call an inlined helper too.
      code = code.slice(0, i) + (isCall ? expr : `(${expr})`) + code.slice(j + 1);
      continue;
    }
    out += ch;
    i++;
  }
  return out;
}

/**
 * The script's text without what it never names: the definitions of constants, and the helpers (a top-level
 * `local function name(` up to its `end` at the start of a line) that no other code line of the script calls, until
 * none is left. A script includes whole helper files, but pays (text, and a closure made on every call) only for
 * the helpers it uses.
 */
function script(file: string): string {
  let lines = inline(file, load(file)).split("\n");
  const named = (name: string, except: number) =>
    lines.some((l, i) => i !== except && !l.trimStart().startsWith("--") && new RegExp(`\\b${name}\\b`).test(l));
  for (let dropped = true; dropped;) {
    dropped = false;
    for (let i = 0; i < lines.length; i++) {
      const def = /^local function (\w+)\(/.exec(lines[i]) ?? /^local ([A-Z][A-Z0-9_]*) = \d+$/.exec(lines[i]);
      if (!def || named(def[1], i)) continue;
      const end = lines[i].startsWith("local function") && !/\bend$/.test(lines[i]) ? lines.indexOf("end", i) : i;
      lines = [...lines.slice(0, i), ...lines.slice(end + 1)];
      dropped = true;
      i--;
    }
  }
  return lines.join("\n");
}

for (const file of names) {
  const source = compact(script(file));
  const sha = createHash("sha1").update(source).digest("hex");
  const id = file.replace(/\.lua$/, "").replace(/_(\w)/g, (_, c: string) => c.toUpperCase());
  body += `export const ${id}: Script = {\n  name: ${JSON.stringify(file)},\n  sha: "${sha}",\n  source: ${
    JSON.stringify(source)
  },\n};\n\n`;
}

if (process.argv.includes("--check")) {
  // A number of lua/_constants.lua spelled out in another Lua file would drift from the TypeScript side unseen.
  const spelled: string[] = [];
  for (const file of readdirSync(luaDir).filter((f) => f.endsWith(".lua") && f !== "_constants.lua")) {
    readFileSync(join(luaDir, file), "utf8").split("\n").forEach((line, i) => {
      if (line.trimStart().startsWith("--")) return;
      for (const c of numbers) {
        if (new RegExp(`(?<![\\w.])${c.value}(?![\\w.])`).test(line)) {
          spelled.push(`lua/${file}:${i + 1}: ${c.value} is ${c.name} (lua/_constants.lua): name it`);
        }
      }
    });
  }
  if (spelled.length) {
    console.error(spelled.join("\n"));
    process.exit(1);
  }
  let current = "";
  try {
    current = readFileSync(out, "utf8");
  } catch { /* missing counts as stale */ }
  if (current !== body) {
    console.error("src/_scripts.ts is stale: run `npm run gen` and commit the result");
    process.exit(1);
  }
  console.log(`src/_scripts.ts is fresh (${names.length} scripts, ${numbers.length} constants)`);
} else {
  writeFileSync(out, body);
  console.log(`wrote src/_scripts.ts (${names.length} scripts, ${numbers.length} constants)`);
}
