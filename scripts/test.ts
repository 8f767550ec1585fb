/**
 * `npm test`: freshness of the generated Lua module, type-check, README's and docs/'s code blocks and links, the API
 * reference, lint, the JSR package (a publish dry run and the doc lint of every export), build, and the same behavioural suite on Node, Bun and Deno,
 * with a pass count per runtime. Exits non-zero if any step fails.
 *
 *   node --import tsx scripts/test.ts [--only node,bun,deno] [--quick] [--jobs N]
 *
 * The suite spends nearly all of its time waiting (on leases expiring, on Redis, on child processes): on this 2-core
 * machine the serial Deno run used 57 s of CPU in 277 s. So the checks and the three runtimes run at the same time,
 * each runtime running `--jobs` files at once (every file starts its own throwaway servers on free ports and shares
 * nothing with another file). Each lane's output is printed whole when it ends, one lane after another.
 *
 * Files named `*.alone.*` (real-time bounds of a few ms, the chaos subset's throughput floors) run after that, alone,
 * one runtime after another.
 *
 * `--quick` (`npm run test:quick`): the behavioural files on Node only, no checks, no Node-only files (the chaos
 * subset, the package, the demo, the topologies too slow to run three times): an answer in under two minutes.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { readdirSync, readFileSync } from "node:fs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = (name: string) => join(root, "node_modules", ".bin", name);

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(name);
const value = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const quick = flag("--quick");
const only = value("--only")?.split(",") ?? (quick ? ["node"] : ["node", "bun", "deno"]);
/** Test files each runtime runs at once. */
const jobs = Number(value("--jobs") ?? (quick ? 6 : 4));
if (!Number.isInteger(jobs) || jobs < 1) {
  throw new TypeError(`--jobs must be a positive integer: current value is ${jobs}`);
}

// `*.test.ts` runs on every runtime; `*.node.*` (topologies too slow to run three times) on Node only; `*.alone.*`
// (real-time bounds of a few ms around a busy event loop, or a throughput floor of worker processes: the chaos subset)
// once every other file has run, with nothing else running, one runtime and one file after another.
const allFiles = readdirSync(join(root, "tests")).filter((f) => f.endsWith(".test.ts")).sort().map((f) => `tests/${f}`);
const alone = (f: string) => f.includes(".alone.");
const nodeOnly = (f: string) => f.includes(".node.");
const nodeFiles = allFiles.filter((f) => !alone(f));
const testFiles = nodeFiles.filter((f) => !nodeOnly(f));
// The JSR entry points (deno.json "exports"), each doc-linted as users of that entry see it.
const jsrEntries: string[] = Object.values(JSON.parse(readFileSync(join(root, "deno.json"), "utf8")).exports);

interface Ran {
  readonly code: number;
  readonly out: string;
  readonly ms: number;
}

/** Run a command to its end, collecting stdout and stderr together (printed by the lane, not as it comes). */
function sh(cmd: string, args: string[], env: Record<string, string> = {}): Promise<Ran> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1", ...env },
    });
    let out = "";
    const onData = (d: Buffer) => (out += d);
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("error", (e) => (out += `\n${e}\n`));
    child.on("close", (code) => resolve({ code: code ?? 1, out, ms: performance.now() - t0 }));
  });
}

interface Count {
  passed: number;
  failed: number;
}

const runtimes: Record<
  string,
  {
    cmd: string;
    args(files: string[], jobs: number): string[];
    env?: Record<string, string>;
    parse(out: string): Count;
  }
> = {
  node: {
    cmd: process.execPath,
    // --test-force-exit: a file whose tests have all ended exits even if a handle outlives them (once, in a clean
    // run, contract.test.ts passed every test and then never exited: a leftover of the test process, not of the
    // library, whose timers are unref'd and checked in tests/process.test.ts). --test-timeout: a hung test fails.
    args: (files, jobs) => [
      "--import",
      "tsx",
      "--test",
      `--test-concurrency=${jobs}`,
      "--test-force-exit",
      "--test-timeout=600000",
      "--test-reporter=spec",
      ...files,
    ],
    parse: (out) => ({ passed: num(out, /^ℹ pass (\d+)/m), failed: num(out, /^ℹ fail (\d+)/m) }),
  },
  bun: {
    cmd: bin("bun"),
    // (--parallel=1 is one worker process, which runs the files one after another.)
    args: (files, jobs) => ["test", "--timeout", "120000", `--parallel=${jobs}`, ...files.map((f) => `./${f}`)],
    parse: (out) => ({ passed: num(out, /^\s*(\d+) pass$/m), failed: num(out, /^\s*(\d+) fail$/m) }),
  },
  deno: {
    cmd: bin("deno"),
    args: (files, jobs) => ["test", "-A", ...(jobs > 1 ? ["--parallel"] : []), ...files],
    env: { DENO_JOBS: String(jobs) },
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

const checks: Array<[string, string, string[]]> = [
  // First: tests/package.node.test.ts builds dist/ too, and the two must not write it at the same time. The Node
  // lane starts once the build has ended (see below).
  ["build", bin("tsup"), []],
  ["lua module fresh", process.execPath, ["--import", "tsx", "scripts/gen_lua.ts", "--check"]],
  ["type-check (core, web-only libs)", bin("tsc"), ["-p", "tsconfig.json"]],
  ["type-check (tests, harness, scripts, examples)", bin("tsc"), ["-p", "tsconfig.test.json"]],
  // Every ts/js block of README.md and docs/**/*.md type-checked against the source entry points, the ones marked
  // `<!-- run -->` run against a throwaway redis-server and required to exit by themselves; their relative links
  // resolved.
  ["README and docs/: code blocks and links", process.execPath, ["--import", "tsx", "scripts/check_readme.ts"]],
  // The API reference from the JSDoc (deno doc --html of every entry), built and its relative links resolved.
  ["API reference builds, links resolve", process.execPath, ["--import", "tsx", "scripts/api_docs.ts"]],
  ["lint", bin("deno"), ["lint"]],
  ["format (deno fmt --check; run deno fmt to fix)", bin("deno"), ["fmt", "--check"]],
  ["exports match", process.execPath, ["--import", "tsx", "scripts/check_exports.ts"]],
  // src/ imports in one direction (src/README.md): no circle, type-only imports included.
  ["no import circle in src/", process.execPath, ["--import", "tsx", "scripts/check_imports.ts"]],
  ["no long function in src/ without a reason", process.execPath, ["--import", "tsx", "scripts/check_functions.ts"]],
  ["size budget (scripts/size.ts: the core entry, gzipped)", process.execPath, ["--import", "tsx", "scripts/size.ts"]],
  // What JSR would take: the files of deno.json "publish", type-checked, with no slow types. --allow-dirty: the
  // dry run otherwise refuses a work tree with uncommitted changes, which says nothing about the package.
  ["JSR publish dry run", bin("deno"), ["publish", "--dry-run", "--allow-dirty"]],
  // Each entry on its own, so a type that one entry names but only another exports is caught.
  ...jsrEntries.map((e): [string, string, string[]] => [`doc lint (${e})`, bin("deno"), ["doc", "--lint", e]]),
];

const t0 = performance.now();
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const summary: string[] = [];
let passed = 0;
let failures = 0;
const running = new Set<string>();
// A line a minute, so that a CI log shows the run is alive while every lane is still buffering.
const heartbeat = setInterval(
  () => console.log(`... ${secs(performance.now() - t0)}: running ${[...running].join(", ")}`),
  60_000,
);
heartbeat.unref();

async function lane(name: string, body: () => Promise<void>): Promise<void> {
  running.add(name);
  try {
    await body();
  } finally {
    running.delete(name);
  }
}

/** Run the checks one after another; `built` resolves once the first (the build) has ended. */
async function runChecks(built: () => void): Promise<void> {
  for (const [label, cmd, args] of checks) {
    const r = await sh(cmd, args);
    if (label === "build") built();
    console.log(`\n=== ${label} (${secs(r.ms)})\n${r.out.trimEnd()}`);
    summary.push(`${r.code === 0 ? "ok  " : "FAIL"} ${label} (${secs(r.ms)})`);
    if (r.code !== 0) failures++;
  }
}

async function runSuite(name: string, files: string[], jobs: number, what = ""): Promise<void> {
  const rt = runtimes[name];
  const r = await sh(rt.cmd, rt.args(files, jobs), rt.env);
  console.log(`\n=== tests on ${name}${what} (${secs(r.ms)})\n${r.out.trimEnd()}`);
  const c = rt.parse(r.out);
  if (r.code !== 0 && c.failed === 0) c.failed = 1; // a crash is a failure even if nothing was counted
  if (c.passed === 0) c.failed = Math.max(c.failed, 1); // running no test is a failure
  failures += c.failed;
  summary.push(
    `${c.failed === 0 ? "ok  " : "FAIL"} ${name}${what}: ${c.passed} passed, ${c.failed} failed (${secs(r.ms)})`,
  );
  passed += c.passed;
}

for (const name of only) {
  if (!runtimes[name]) throw new TypeError(`--only takes node, bun and deno: current value has '${name}'`);
}
let built!: () => void;
const isBuilt = new Promise<void>((resolve) => (built = resolve));
const lanes: Promise<void>[] = [];
if (quick) built();
else lanes.push(lane("checks", () => runChecks(built)));
for (const name of only) {
  const files = name === "node" && !quick ? nodeFiles : testFiles;
  // Node runs tests/package.node.test.ts, which builds dist/ as the checks' first step does: it waits for that.
  const run = () => runSuite(name, files, jobs);
  lanes.push(lane(name, () => name === "node" ? isBuilt.then(run) : run()));
}
await Promise.all(lanes);
// Then the files about real time, alone: one runtime at a time, one file at a time.
for (const name of only) {
  // (The quick loop leaves the Node-only ones out here too.)
  const files = allFiles.filter((f) => alone(f) && (!nodeOnly(f) || (name === "node" && !quick)));
  await lane(`${name} (alone)`, () => runSuite(name, files, 1, " (alone)"));
}
clearInterval(heartbeat);

console.log(`\n=== summary (${secs(performance.now() - t0)})`);
for (const line of summary) console.log(line);
console.log(`${passed} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
