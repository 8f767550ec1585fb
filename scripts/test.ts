/**
 * `npm test`: freshness of the generated Lua module, type-check, README code blocks, lint, the JSR package (a
 * publish dry run and the doc lint of every export), build, then the same behavioural suite on Node, Bun and Deno,
 * with a pass count per runtime. Exits non-zero if any step fails.
 *
 *   node --import tsx scripts/test.ts [--only node,bun,deno]
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { readdirSync, readFileSync } from "node:fs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = (name: string) => join(root, "node_modules", ".bin", name);
// `*.test.ts` runs on every runtime; `*.node.test.ts` (topologies too slow to run three times) on Node only.
const allFiles = readdirSync(join(root, "tests")).filter((f) => f.endsWith(".test.ts")).sort().map((f) => `tests/${f}`);
const testFiles = allFiles.filter((f) => !f.endsWith(".node.test.ts"));
// The JSR entry points (deno.json "exports"), each doc-linted as users of that entry see it.
const jsrEntries: string[] = Object.values(JSON.parse(readFileSync(join(root, "deno.json"), "utf8")).exports);

function sh(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1" },
    });
    let out = "";
    const onData = (d: Buffer) => {
      out += d;
      process.stdout.write(d);
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("close", (code) => resolve({ code: code ?? 1, out }));
  });
}

interface Count {
  passed: number;
  failed: number;
}

const runtimes: Record<string, { cmd: string; args: string[]; parse(out: string): Count }> = {
  node: {
    cmd: process.execPath,
    args: ["--import", "tsx", "--test", "--test-reporter=spec", ...allFiles],
    parse: (out) => ({ passed: num(out, /^ℹ pass (\d+)/m), failed: num(out, /^ℹ fail (\d+)/m) }),
  },
  bun: {
    cmd: bin("bun"),
    args: ["test", "--timeout", "120000", ...testFiles.map((f) => `./${f}`)],
    parse: (out) => ({ passed: num(out, /^\s*(\d+) pass$/m), failed: num(out, /^\s*(\d+) fail$/m) }),
  },
  deno: {
    cmd: bin("deno"),
    args: ["test", "-A", ...testFiles],
    // "ok | 5 passed (64 steps) | 0 failed": every test sits in a describe() block, so steps are the tests.
    parse: (out) => {
      const line = out.split("\n").reverse().find((l) => /\d+ passed.*\|\s*\d+ failed/.test(l)) ?? "";
      const passed = /(\d+) passed(?: \((\d+) steps?\))?/.exec(line);
      const failed = /(\d+) failed(?: \((\d+) steps?\))?/.exec(line);
      return {
        passed: passed ? Number(passed[2] ?? passed[1]) : 0,
        failed: failed ? Number(failed[2] ?? failed[1]) : 1,
      };
    },
  },
};

function num(out: string, re: RegExp): number {
  const m = re.exec(out);
  return m ? Number(m[1]) : 0;
}

const onlyArg = process.argv.indexOf("--only");
const only = onlyArg > 0 ? process.argv[onlyArg + 1].split(",") : Object.keys(runtimes);

const checks: Array<[string, string, string[]]> = [
  ["lua module fresh", process.execPath, ["--import", "tsx", "scripts/gen_lua.ts", "--check"]],
  ["type-check (core, web-only libs)", bin("tsc"), ["-p", "tsconfig.json"]],
  ["type-check (tests, harness, scripts, examples)", bin("tsc"), ["-p", "tsconfig.test.json"]],
  // Every ts/js block of README.md type-checked against the source entry points, the ones marked `<!-- run -->`
  // run against a throwaway redis-server and required to exit by themselves.
  ["README code blocks", process.execPath, ["--import", "tsx", "scripts/check_readme.ts"]],
  ["lint", bin("deno"), ["lint"]],
  ["format (deno fmt --check; run deno fmt to fix)", bin("deno"), ["fmt", "--check"]],
  ["exports match", process.execPath, ["--import", "tsx", "scripts/check_exports.ts"]],
  // src/ imports in one direction (src/README.md): no circle, type-only imports included.
  ["no import circle in src/", process.execPath, ["--import", "tsx", "scripts/check_imports.ts"]],
  ["size budget (scripts/size.ts: the core entry, gzipped)", process.execPath, ["--import", "tsx", "scripts/size.ts"]],
  // What JSR would take: the files of deno.json "publish", type-checked, with no slow types. --allow-dirty: the
  // dry run otherwise refuses a work tree with uncommitted changes, which says nothing about the package.
  ["JSR publish dry run", bin("deno"), ["publish", "--dry-run", "--allow-dirty"]],
  // Each entry on its own, so a type that one entry names but only another exports is caught.
  ...jsrEntries.map((e): [string, string, string[]] => [`doc lint (${e})`, bin("deno"), ["doc", "--lint", e]]),
  ["build", bin("tsup"), []],
];

const summary: string[] = [];
let ok = true;
for (const [label, cmd, args] of checks) {
  console.log(`\n=== ${label}`);
  const r = await sh(cmd, args);
  summary.push(`${r.code === 0 ? "ok  " : "FAIL"} ${label}`);
  if (r.code !== 0) ok = false;
}
let passed = 0;
let failed = 0;
for (const name of only) {
  const rt = runtimes[name];
  console.log(`\n=== tests on ${name}`);
  const r = await sh(rt.cmd, rt.args);
  const c = rt.parse(r.out);
  if (r.code !== 0 && c.failed === 0) c.failed = 1; // a crash is a failure even if nothing was counted
  if (c.passed === 0) c.failed = Math.max(c.failed, 1); // running no test is a failure
  passed += c.passed;
  failed += c.failed;
  summary.push(`${c.failed === 0 ? "ok  " : "FAIL"} ${name}: ${c.passed} passed, ${c.failed} failed`);
}
console.log("\n=== summary");
for (const line of summary) console.log(line);
if (!ok) failed += 1;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
