/**
 * Checks the code blocks and links of README.md, CHANGELOG.md and of every Markdown page of docs/ (docs/**\/*.md, the generated
 * docs/api/ aside), as a reader would copy them: every TypeScript block (```ts, ```typescript, ```mts, ```cts) and
 * JavaScript block (```js, ```javascript, ```mjs, ```cjs) is type-checked, and the ones marked runnable are also run.
 * ```tsx and ```jsx blocks fail the check: there is no JSX setup here to check them against. Other fences (sh, sql,
 * text, java, none) are skipped: README's `## Try it from a clone` sh block is what CI itself runs (.ci/run), and
 * the rest are commands, SQL, other languages or formulas. bench/README.md and chaos/README.md are developer notes
 * with sh blocks only, and are not checked.
 *
 *   node --import tsx scripts/check_readme.ts [--keep] [FILE.md ...]
 *
 * --keep: leave the generated files, and say where. FILE.md: the Markdown files to check (paths from the current
 * directory) instead of README.md and docs/; the tests use it on READMEs of their own, and a writer on one page.
 *
 * Links: every relative link outside code (`[text](target)`, images too) must name a file or folder that exists,
 * and its `#anchor`, if any, a heading of the Markdown file it names (as GitHub makes anchors: lower case,
 * punctuation dropped, spaces to hyphens, `-1`, `-2` for repeats). Links with a scheme (https:) are not followed.
 * A link into docs/api/ (the API reference, generated and not committed) is resolved in a reference built for the
 * check.
 *
 * Fences are read as CommonMark reads them: ``` or ~~~, three or more, indented by at most 3 spaces (a block in a
 * list item; that indent is taken off the block's lines); the language is the first word of the info string, in
 * any case (```ts title="a.ts" is a ts block); the fence closes at a line of the same character, at least as long,
 * with nothing after it. A fence that is never closed fails the check, and so does a ts or js fence indented 4
 * spaces or more (a nested list item, or an indented code block: which one is not read here), rather than being
 * skipped.
 *
 * Each block becomes a module of its own in a temporary directory (with `"type": "module"`, as the README asks of a
 * project), next to a tsconfig.json whose `paths` map `redlease` and its subpaths (also as `@redlease/redlease` and
 * `jsr:@redlease/redlease`, from deno.json "exports") to the source entry points, and `npm:NAME@…` to the installed
 * package NAME. All blocks are type-checked by one TypeScript program (strict, lib ES2022 + ESNext.Disposable +
 * DOM, @types/node) with `redis` as node-redis v5, then by another with `redis` as v4, since the README promises
 * both; a block whose text says "node-redis v5" (a comment, as in the Sentinel block) is checked against v5 only.
 * An error is reported at its README line.
 *
 * What a block may use without defining it:
 * - the app's functions and values (`chargeCustomer`, `ledger`, `cleanup`, …): globals declared, with one
 *   signature each, by scripts/readme/app.ts, which also defines them for the blocks that run;
 * - Deno's and Bun's APIs that the blocks use: scripts/readme/runtimes.d.ts.
 *
 * Markers: an HTML comment on the line right before the fence (invisible once rendered), indented by at most 3
 * spaces. Two words:
 * - `<!-- run -->`: a whole program that runs here. After the type-check it is run on Node
 *   (`node --import tsx`, cwd the temporary directory) with `REDIS_URL` set to a throwaway redis-server's URL,
 *   and must exit with code 0 by itself within 90 s: a hang (an open client, say) fails. `redis` is node-redis v5
 *   there (what `npm install redis` installs).
 * - `<!-- fragment -->`: an excerpt that uses values from the code around it. Before it come declarations of
 *   those it mentions: `client` (a connected node-redis client), `signal` (an AbortSignal), `id` and `job`.
 *   Type-checked only.
 * A block cannot be both. A block without a marker is a whole program that is type-checked only: what cannot run
 * here (Deno, Bun, workers, Cluster, Sentinel, Redlock over remote hosts). An unknown marker word fails the check,
 * and so does a comment with a marker word that is not on the line right before a fence (a blank line between,
 * say): it would mark nothing.
 */
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { spawnSync } from "node:child_process";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { type Ran, runProcess } from "../harness/process.ts";
import { startRedis } from "../harness/redis.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
for (const a of args) {
  if (a.startsWith("-") && a !== "--keep") {
    console.error(`unknown option '${a}'; usage: node --import tsx scripts/check_readme.ts [--keep] [FILE.md ...]`);
    process.exit(2);
  }
}
const keep = args.includes("--keep");
const mdFiles = args.filter((a) => !a.startsWith("-"));
const docs = mdFiles.length > 0 ? mdFiles.map((f) => resolve(f)) : defaultDocs();
/** README.md is for users, short (issue 31): the rest lives in docs/. */
const README_MAX_LINES = 400;

/**
 * README.md, CHANGELOG.md (its migration examples) and every Markdown page of docs/ (and its folders, but not the
 * generated API reference, docs/api/).
 */
function defaultDocs(): string[] {
  const pages = existsSync(join(root, "docs"))
    ? readdirSync(join(root, "docs"), { recursive: true, encoding: "utf8" })
      .filter((f) => f.endsWith(".md") && !f.split(/[\\/]/).includes("api"))
      .sort()
      .map((f) => join(root, "docs", f))
    : [];
  return [join(root, "README.md"), join(root, "CHANGELOG.md"), ...pages].filter((f) => existsSync(f));
}
/** A fence's language (its info string's first word, lower-cased) to the block's kind and its module's extension. */
const languages: Record<string, { readonly lang: "ts" | "js"; readonly ext: string }> = {
  ts: { lang: "ts", ext: "ts" },
  typescript: { lang: "ts", ext: "ts" },
  mts: { lang: "ts", ext: "mts" },
  cts: { lang: "ts", ext: "cts" },
  js: { lang: "js", ext: "js" },
  javascript: { lang: "js", ext: "js" },
  mjs: { lang: "js", ext: "mjs" },
  cjs: { lang: "js", ext: "cjs" },
};
/** Languages a reader would take for TypeScript or JavaScript that are not checked here: they fail the check. */
const unchecked = new Set(["tsx", "jsx"]);
const markerWords = new Set(["run", "fragment"]);
// (A block that waits for a failover or a few rounds takes 10-19 s on its own, and 30-46 s while CI's three runtimes
// and the other blocks load both cores, tsx compiling it included: 46.1 s failed two CI runs of 27 Nov at a 45 s
// limit. A hang is caught as surely at 90 s.)
const runTimeoutMs = 90_000;
const app = join(root, "scripts", "readme", "app.ts");
const runtimes = join(root, "scripts", "readme", "runtimes.d.ts");
/** Where the API reference is built (`npm run docs:api`); not committed, so links into it are resolved in a build. */
const apiDir = join(root, "docs", "api");
let apiBuild: string | undefined;

/** What a fragment may use from the code around it, declared before it when it mentions the name. */
const context: Record<string, string> = {
  client: `declare const client: ReturnType<typeof import("redis").createClient>;`,
  signal: "declare const signal: AbortSignal;",
  id: "declare const id: string;",
  job: "declare const job: { readonly id: string; readonly token: string };",
};

interface Block {
  readonly doc: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: "ts" | "js";
  /** The generated module's extension. */
  readonly ext: string;
  readonly code: string;
  /** Per line of the code, the spaces of indent taken off it (the opening fence's, at most). */
  readonly stripped: readonly number[];
  readonly run: boolean;
  readonly fragment: boolean;
  file: string;
  /** Lines put before the code. */
  preludeLines: number;
}

const problems: string[] = [];
{
  const readme = join(root, "README.md");
  const n = docs.includes(readme) ? readFileSync(readme, "utf8").split(/\r?\n/).length - 1 : 0;
  if (n > README_MAX_LINES) {
    problems.push(`README.md: ${n} lines, more than ${README_MAX_LINES}: move the rest to docs/`);
  }
}

/** An opening or closing fence, indented by at most 3 spaces: its indent, its run of ` or ~, and the rest. */
const fenceLine = /^( {0,3})(`{3,}|~{3,})(.*)$/;
/** A line that is an HTML comment and nothing else, indented by at most 3 spaces: a marker, if before a fence. */
const commentLine = /^ {0,3}<!--(.*)-->[ \t]*$/;
/** A fence indented 4 spaces or more (or by a tab): its language. */
const deepFence = /^(?: {4,}| {0,3}\t)[ \t]*(?:`{3,}|~{3,})[ \t]*([^\s`]*)/;

/** The opening fence on a line, if it is one: a backtick fence's info string may not contain a backtick. */
function opening(line: string): { indent: number; fence: string; lang: string } | undefined {
  const m = fenceLine.exec(line);
  if (!m || (m[2][0] === "`" && m[3].includes("`"))) return undefined;
  return { indent: m[1].length, fence: m[2], lang: (m[3].trim().split(/\s+/)[0] ?? "").toLowerCase() };
}

function parse(path: string): Block[] {
  const rel = relative(root, path);
  const doc = rel.startsWith("..") || isAbsolute(rel) ? path : rel;
  const lines = readFileSync(path, "utf8").split(/\r?\n/);
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const comment = commentLine.exec(lines[i]);
    if (comment) {
      const words = comment[1].trim().split(/\s+/).filter(Boolean);
      if (words.some((w) => markerWords.has(w)) && !(i + 1 < lines.length && opening(lines[i + 1]))) {
        problems.push(
          `${doc}:${i + 1}: the marker '${lines[i].trim()}' is not on the line right before a fence ` +
            `(a blank line between?): it marks nothing`,
        );
      }
      continue;
    }
    const open = opening(lines[i]);
    if (!open) {
      const deep = deepFence.exec(lines[i]);
      if (deep && (languages[deep[1].toLowerCase()] || unchecked.has(deep[1].toLowerCase()))) {
        problems.push(
          `${doc}:${i + 1}: a '${deep[1]}' fence indented 4 spaces or more, which is not checked: ` +
            `indent it by 3 spaces at most`,
        );
      }
      continue;
    }
    const char = open.fence[0];
    const closing = new RegExp(`^ {0,3}${char === "`" ? "`" : "~"}{${open.fence.length},}[ \\t]*$`);
    let end = i + 1;
    while (end < lines.length && !closing.test(lines[end])) end++;
    if (end === lines.length) {
      problems.push(`${doc}:${i + 1}: the fence '${lines[i].trim()}' is never closed`);
      break;
    }
    const marker = i > 0 ? commentLine.exec(lines[i - 1]) : null;
    const words = marker ? marker[1].trim().split(/\s+/).filter(Boolean) : [];
    const language = languages[open.lang];
    for (const w of words) if (!markerWords.has(w)) problems.push(`${doc}:${i}: unknown marker '${w}'`);
    if (unchecked.has(open.lang)) {
      problems.push(
        `${doc}:${i + 1}: a '${open.lang}' block, which is not checked (no JSX here): make it a ts or js block`,
      );
    } else if (words.length > 0 && !language) {
      problems.push(`${doc}:${i}: a marker before a '${open.lang}' block, which is not checked`);
    }
    if (words.includes("run") && words.includes("fragment")) {
      problems.push(`${doc}:${i}: a fragment cannot run: mark it 'run' or 'fragment'`);
    }
    if (words.includes("fragment") && language?.lang === "js") {
      problems.push(`${doc}:${i}: fragments must be ts blocks`);
    }
    if (language) {
      const body = lines.slice(i + 1, end);
      const stripped = body.map((l) => Math.min(open.indent, /^ */.exec(l)![0].length));
      blocks.push({
        doc,
        line: i + 1,
        ...language,
        code: body.map((l, k) => l.slice(stripped[k])).join("\n") + "\n",
        stripped,
        run: words.includes("run"),
        fragment: words.includes("fragment"),
        file: "",
        preludeLines: 0,
      });
    }
    i = end;
  }
  return blocks;
}

const blocks = docs.flatMap(parse);
checkLinks(docs);
const dir = mkdtempSync(join(tmpdir(), "redlease-readme-"));
process.on(
  "exit",
  () => keep ? console.log(`generated files kept in ${dir}`) : rmSync(dir, { recursive: true, force: true }),
);
symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module", private: true }, null, 2));

// redlease and its subpaths, as npm, JSR and `deno add` name them, to their source entry points.
const paths: Record<string, string[]> = {};
for (const [sub, src] of Object.entries<string>(JSON.parse(readFileSync(join(root, "deno.json"), "utf8")).exports)) {
  for (const name of ["redlease", "@redlease/redlease", "jsr:@redlease/redlease"]) {
    paths[name + sub.slice(1)] = [join(root, src)];
  }
}
for (const [i, b] of blocks.entries()) {
  // Deno's `npm:NAME@range` specifiers, to the installed NAME.
  for (const [, , spec, name] of b.code.matchAll(/from\s+(["'])(npm:((?:@[^/@"']+\/)?[^/@"']+)[^"']*)\1/g)) {
    paths[spec] = [join(root, "node_modules", name)];
  }
  const prelude = b.fragment
    ? Object.entries(context).filter(([name]) => new RegExp(`\\b${name}\\b`).test(b.code)).map(([, d]) => d)
    : [];
  b.preludeLines = prelude.length;
  b.file = join(dir, `block${String(i + 1).padStart(2, "0")}_line${b.line}.${b.ext}`);
  writeFileSync(b.file, prelude.map((l) => l + "\n").join("") + b.code);
}
// The runs import `redis` as node-redis v5 (its main file: tsx maps paths to files, not to package directories).
const redis5 = join(root, "node_modules", "redis5");
const redis5Main = join(redis5, JSON.parse(readFileSync(join(redis5, "package.json"), "utf8")).main);
const tsconfig = {
  compilerOptions: {
    target: "ES2022",
    module: "ESNext",
    moduleResolution: "Bundler",
    moduleDetection: "force",
    lib: ["ES2022", "ESNext.Disposable", "DOM"],
    types: ["node"],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    allowJs: true,
    checkJs: true,
    allowImportingTsExtensions: true,
    paths: { ...paths, redis: [redis5Main] },
  },
  files: [...blocks.map((b) => b.file), app, runtimes],
};
writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(tsconfig, null, 2));

const where = (b: Block) => `${b.doc}:${b.line}`;
const t0 = performance.now();

// One program for every block, per node-redis major (v5 first: what `npm install redis` installs). Source files are
// parsed once for both.
const config = ts.parseJsonConfigFileContent(tsconfig, ts.sys, dir);
for (const d of config.errors) problems.push(`tsconfig: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`);
const variants = [{ label: "node-redis v5", dir: "redis5" }, { label: "node-redis v4", dir: "redis" }];
const parsed = new Map<string, ts.SourceFile | undefined>();
const byFile = new Map(blocks.map((b) => [b.file, b]));
const found = new Map<string, string[]>();
const failed = new Set<Block>();
for (const [n, variant] of variants.entries()) {
  const options = { ...config.options, paths: { ...paths, redis: [join(root, "node_modules", variant.dir)] } };
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile;
  host.getSourceFile = (file, ...rest) => {
    if (!parsed.has(file)) parsed.set(file, read.call(host, file, ...rest));
    return parsed.get(file);
  };
  // v4: only the blocks that use node-redis ("redis" or 'redis', as imported, or a fragment's `client`), unless they
  // say v5.
  const usesRedis = (b: Block) => /(["'`])redis\1/.test(b.code) || (b.fragment && /\bclient\b/.test(b.code));
  const checked = blocks.filter((b) => n === 0 || (usesRedis(b) && !/node-redis v5/.test(b.code)));
  const files = [...checked.map((b) => b.file), app, runtimes];
  const program = ts.createProgram({ rootNames: files, options, host });
  const diagnostics = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...files.flatMap((f) => {
      const sf = program.getSourceFile(f);
      return sf ? [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)] : [];
    }),
  ];
  for (const d of diagnostics) {
    let at = "";
    if (d.file && d.start !== undefined) {
      const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
      const b = byFile.get(d.file.fileName);
      if (b) failed.add(b);
      at = !b
        ? `${relative(root, d.file.fileName)}:${line + 1}:${character + 1}: `
        : line < b.preludeLines
        ? `${where(b)} (its fragment prelude): `
        : `${b.doc}:${b.line + 1 + line - b.preludeLines}:${
          character + 1 + (b.stripped[line - b.preludeLines] ?? 0)
        }: `;
    }
    const key = `${at}TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n  ")}`;
    found.set(key, [...found.get(key) ?? [], variant.label]);
  }
}
for (const [text, labels] of found) {
  problems.push(labels.length < variants.length ? `${text} [${labels.join(", ")} only]` : text);
}
const typeMs = performance.now() - t0;

// Then the runnable blocks, at once, each in its own process.
const runnable = blocks.filter((b) => b.run);
const server = runnable.length > 0 ? await startRedis() : undefined;
const env = { ...process.env, REDIS_URL: server?.url, NO_COLOR: "1" };
const ran = await Promise.all(
  runnable.map((b) =>
    runProcess(process.execPath, ["--import", "tsx", "--import", pathToFileURL(app).href, b.file], {
      cwd: dir,
      env,
      timeoutMs: runTimeoutMs,
    }).then((r): [Block, Ran] => [b, r])
  ),
);
await server?.stop();
for (const [b, r] of ran) {
  if (r.killed || r.code !== 0) {
    failed.add(b);
    const why = r.killed
      ? `did not exit within ${runTimeoutMs / 1000} s (a hang: is a client left open?)`
      : `exited with code ${r.code}`;
    problems.push(`${where(b)}: the block ${why}\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}---`);
  }
}

const runMs = new Map(ran.map(([b, r]) => [b, r.ms]));
for (const b of blocks) {
  const how = b.run
    ? `type-checked, ran in ${((runMs.get(b) ?? 0) / 1000).toFixed(1)} s`
    : b.fragment
    ? "type-checked (fragment)"
    : "type-checked";
  console.log(`${failed.has(b) ? "FAIL" : "ok  "} ${where(b)} ${b.ext}: ${how}`);
}
for (const p of problems) console.error(p);
console.log(
  `${blocks.length} blocks type-checked in ${(typeMs / 1000).toFixed(1)} s, ${runnable.length} run; ${
    ((performance.now() - t0) / 1000).toFixed(1)
  } s in all${problems.length ? `; ${problems.length} problem(s)` : ""}`,
);
process.exit(problems.length === 0 ? 0 : 1);

/**
 * The file a link into docs/api/ names, in a reference built here into a temporary folder by scripts/api_docs.ts
 * (once, on the first such link; under a second): a link to a symbol the JSDoc no longer has fails.
 */
function generatedApi(to: string): string {
  if (apiBuild === undefined) {
    apiBuild = mkdtempSync(join(tmpdir(), "redlease-readme-api-"));
    const out = join(apiBuild, "api");
    process.on("exit", () => rmSync(apiBuild!, { recursive: true, force: true }));
    const r = spawnSync(process.execPath, ["--import", "tsx", join(root, "scripts", "api_docs.ts"), "--out", out], {
      cwd: root,
      encoding: "utf8",
    });
    if (r.status !== 0) problems.push(`the API reference did not build for the links into docs/api/:\n${r.stderr}`);
  }
  const mapped = join(apiBuild, "api", relative(apiDir, to));
  return existsSync(mapped) && statSync(mapped).isDirectory() ? join(mapped, "index.html") : mapped;
}

/** The lines of a Markdown text outside fenced code, with their 0-based indexes (for headings and links). */
function* prose(text: string): Generator<[number, string]> {
  let fence: string | undefined;
  for (const [i, line] of text.split(/\r?\n/).entries()) {
    const f = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (f) {
      if (fence === undefined) fence = f[1];
      else if (f[1][0] === fence[0] && f[1].length >= fence.length) fence = undefined;
    } else if (fence === undefined) yield [i, line];
  }
}

/** GitHub's anchors for the headings of a Markdown text (outside fences), as its renderer makes them. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, line] of prose(text)) {
    const h = /^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$/.exec(line);
    if (!h) continue;
    const slug = h[1].replace(/<[^>]*>/g, "").toLowerCase().replace(/[^\p{L}\p{N}\p{M} _-]/gu, "").replace(/ /g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/**
 * Every relative link of the checked Markdown files (`[text](target)`, images too, outside code) must name a file or
 * folder of the repository, and its `#anchor`, if any, a heading of the Markdown file it names (or of its own page).
 * Links with a scheme (https:, mailto:) are not followed.
 */
function checkLinks(files: readonly string[]): void {
  const cache = new Map<string, Set<string>>();
  const anchorsOf = (file: string) => {
    if (!cache.has(file)) cache.set(file, anchors(readFileSync(file, "utf8")));
    return cache.get(file)!;
  };
  for (const file of files) {
    const rel = relative(root, file);
    const doc = rel.startsWith("..") || isAbsolute(rel) ? file : rel;
    for (const [i, line] of prose(readFileSync(file, "utf8"))) {
      for (const m of line.replace(/(`+)[^`]*?\1/g, "").matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) {
        const target = m[1];
        if (target === "" || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
        const [path, anchor] = target.split("#", 2) as [string, string | undefined];
        let to = path === "" ? file : resolve(dirname(file), decodeURIComponent(path));
        const at = `${doc}:${i + 1}: the link '${target}'`;
        if (to === apiDir || to.startsWith(apiDir + sep)) to = generatedApi(to);
        if (!existsSync(to)) {
          problems.push(`${at} names a file that does not exist`);
          continue;
        }
        if (anchor !== undefined && to.endsWith(".md") && statSync(to).isFile()) {
          if (!anchorsOf(to).has(anchor.toLowerCase())) {
            problems.push(`${at} names no heading of ${relative(root, to)}`);
          }
        }
      }
    }
  }
}
