/**
 * Instructions redis-server executes per call of each exclusive-script path, for one or more versions, counted by
 * valgrind's callgrind (issue 30): a count that does not move with the machine's load, where CPU time on a shared
 * 2-core machine moves by ±20% between rounds. It counts redis-server's user-space instructions only (the parsing,
 * the Lua, the commands, the reply; not the kernel's socket work), and the calls are sequential (one in flight), so
 * every call pays the same event-loop and I/O overhead. Counts move by about ±1.5% between identical versions
 * (memory allocation and dictionary growth). Needs `valgrind` and `callgrind_control` on the PATH.
 *
 *   node --import tsx bench/scripts_instructions.ts [N=1000] VERSION...
 *   node --import tsx bench/scripts_instructions.ts 1000 2fbd63b .      (a revision against the working tree)
 *
 * A version is as in bench/scripts_ab.ts (a git revision, a module path, or `.`); `floor` is the fenced and fair
 * floor scripts of bench/_libs.ts (on 2 keys, as scripts_cost.ts runs them). The paths are scripts_ab.ts's, run on a
 * flushed keyspace per version, and, for a version with the set scripts, the general path every weighted permit takes
 * (acquire_set and release_set: free, queued, handed over; issue 32).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createClient } from "redis";
import { freePort, sleep } from "../harness/redis.ts";
import { FAIR_HANDOFF, FAIR_QUEUE, FENCED_ACQUIRE, FENCED_RELEASE } from "./_libs.ts";

interface Script {
  readonly sha: string;
  readonly source: string;
}

const N = Number(process.argv[2]), names = process.argv.slice(3);
if (!(Number.isInteger(N) && N > 0) || names.length === 0) {
  console.error("node --import tsx bench/scripts_instructions.ts N VERSION...   (git revision, module, . or floor)");
  process.exit(1);
}
const sha1 = (s: string) => createHash("sha1").update(s).digest("hex");
const script = (source: string): Script => ({ source, sha: sha1(source) });

/** A version's scripts by name: acquire, release, extend (or the floor's). */
interface Scripts {
  readonly acquire: Script;
  readonly release: Script;
  readonly extend?: Script;
  readonly queue?: Script;
  readonly handoff?: Script;
  /** The scripts of shared holds and permits (measured on their weighted paths), where the version has them. */
  readonly acquireSet?: Script;
  readonly releaseSet?: Script;
}

async function load(version: string): Promise<Scripts> {
  if (version === "floor") {
    const [acquire, release, queue, handoff] = [FENCED_ACQUIRE, FENCED_RELEASE, FAIR_QUEUE, FAIR_HANDOFF].map(script);
    return { acquire, release, queue, handoff };
  }
  if (version === ".") return await import("../src/_scripts.ts");
  if (version.endsWith(".ts")) return await import(resolve(version));
  const text = execFileSync("git", ["show", `${version}:src/_scripts.ts`], { encoding: "utf8" });
  const pick = (name: string) => {
    const m = new RegExp(
      `export const ${name}: Script = \\{\\n  name: "[^"]*",\\n  sha: "(\\w+)",\\n  source: (".*"),\\n`,
    )
      .exec(text);
    if (!m) throw new Error(`${version}: no ${name} script`);
    return { sha: m[1], source: JSON.parse(m[2]) as string };
  };
  const set = text.includes("export const acquireSet: Script")
    ? { acquireSet: pick("acquireSet"), releaseSet: pick("releaseSet") }
    : {};
  return { acquire: pick("acquire"), release: pick("release"), extend: pick("extend"), ...set };
}
const versions = await Promise.all(names.map(load));

const dir = mkdtempSync(join(tmpdir(), "redlease-callgrind-"));
const port = await freePort();
const server: ChildProcess = spawn("valgrind", [
  "--tool=callgrind",
  `--callgrind-out-file=${join(dir, "cg.out.%p")}`,
  "redis-server",
  "--port",
  String(port),
  "--bind",
  "127.0.0.1",
  "--save",
  "",
  "--appendonly",
  "no",
  "--hz",
  "1",
], { stdio: "ignore" });
const url = `redis://127.0.0.1:${port}`;
const c = createClient({ url }), sub = createClient({ url });
for (const x of [c, sub]) x.on("error", () => {});
for (let i = 0;; i++) {
  try {
    await c.connect();
    break;
  } catch (e) {
    if (i > 120) throw e;
    await sleep(500);
  }
}
await sub.connect();
await sub.pSubscribe("redlease:*", () => {});

/** Runs the calls one at a time between two callgrind dumps, the second named by `label`. */
async function measure(label: string, make: (i: number) => string[], expect: (r: unknown, i: number) => boolean) {
  execFileSync("callgrind_control", ["-d", "skip", String(server.pid)], { stdio: "ignore" });
  let bad = 0;
  for (let i = 0; i < N; i++) if (!expect(await c.sendCommand(make(i)), i)) bad++;
  execFileSync("callgrind_control", ["-d", label, String(server.pid)], { stdio: "ignore" });
  if (bad) console.error(`${label}: ${bad} of ${N} replies not as expected`);
  labels.push(label);
}
const labels: string[] = [];
const id = (i: number, part: string) => `${(i * 2654435761 >>> 0).toString(16).padStart(8, "0")}-${part}`;
const owner = (i: number) => id(i, "1111-4111-8111-111111111111");
const waiter = (i: number) => id(i, "2222-4222-8222-222222222222");
const wid = (i: number) => waiter(i).replaceAll("-", "");
const entry = (i: number) => `${"c".repeat(32)}|${wid(i)}|30000|1000|x|${waiter(i)}`;
const num = (r: unknown) => Number(r);
const fences: unknown[] = [];

/**
 * The general path of the shared holds' and permits' scripts, which every weighted hold takes (2 of 3 permits): taken
 * on a free lease and released; taken, a waiter of the same weight queued behind it, and handed over by the release.
 */
async function weighted(
  tag: string,
  acquireSet: Script,
  releaseSet: Script,
  keys: (p: string, i: number) => string[],
  keep: (r: unknown, i: number) => boolean,
) {
  const acq = (
    k: string[],
    o: string,
    attempt: string,
    entry = "",
  ) => ["EVALSHA", acquireSet.sha, "4", ...k, o, "300000", attempt, entry, entry ? "30000" : "", "PUBLISH", "p3w2"];
  const rel = (
    k: string[],
    o: string,
    fence: unknown,
  ) => ["EVALSHA", releaseSet.sha, "4", ...k, o, "10000", String(fence), "", "", "PUBLISH"];
  const setEntry = (i: number) => `${"c".repeat(32)}|${wid(i)}|30000|1000|p3w2|${waiter(i)}`;
  await measure(`${tag} acquire_set: weighted, free`, (i) => acq(keys("w", i), owner(i), `a${wid(i)}`), keep);
  await measure(
    `${tag} release_set: weighted, no waiter`,
    (i) => rel(keys("w", i), owner(i), fences[i]),
    (r) => num(r) === 2,
  );
  for (let i = 0; i < N; i++) fences[i] = await c.sendCommand(acq(keys("v", i), owner(i), `a${wid(i)}`));
  await measure(
    `${tag} acquire_set: weighted, queue the waiter`,
    (i) => acq(keys("v", i), waiter(i), wid(i), setEntry(i)),
    Array.isArray,
  );
  await measure(
    `${tag} release_set: weighted, hand over`,
    (i) => rel(keys("v", i), owner(i), fences[i]),
    (r) => num(r) === 3,
  );
}

try {
  for (const [v, s] of versions.entries()) {
    await c.sendCommand(["FLUSHALL", "SYNC"]);
    for (const x of Object.values(s) as Array<Script | undefined>) {
      if (x?.source) await c.sendCommand(["SCRIPT", "LOAD", x.source]);
    }
    // (A dump's label starts with a letter: callgrind_control reads one that starts with a digit or a dot as a pid.)
    const tag = `v${v}`;
    // (Leases of 300 s: a call under valgrind is some 50 times slower.)
    if (names[v] === "floor") {
      const k = (p: string, i: number) => [`redlease:{${p}${i}}`, `redlease:{${p}${i}}:q`];
      await measure(
        `${tag} acquire: free`,
        (i) => ["EVALSHA", s.acquire.sha, "2", ...k("f", i), owner(i), "300000"],
        (r) => num(r) > 0,
      );
      await measure(
        `${tag} release: last hold, no waiter`,
        (i) => ["EVALSHA", s.release.sha, "2", ...k("f", i), owner(i), "10000"],
        (r) => num(r) === 2,
      );
      for (let i = 0; i < N; i++) await c.sendCommand(["SET", k("q", i)[0], `1:${owner(i)}`, "PX", "300000"]);
      await measure(
        `${tag} acquire: queue the waiter`,
        (i) => ["EVALSHA", s.queue!.sha, "2", ...k("q", i), waiter(i), "300000", entry(i), "30000"],
        (r) => Array.isArray(r),
      );
      await measure(
        `${tag} release: hand over`,
        (i) => ["EVALSHA", s.handoff!.sha, "2", ...k("q", i), owner(i), "300000"],
        (r) => num(r) === 3,
      );
      continue;
    }
    const keys = (p: string, i: number) => ["", ":q", ":s", ":d"].map((x) => `redlease:{${p}${i}}${x}`);
    const acq = (
      k: string[],
      o: string,
      attempt: string,
      ...rest: string[]
    ) => ["EVALSHA", s.acquire.sha, "4", ...k, o, "300000", attempt, ...rest];
    const rel = (
      k: string[],
      o: string,
      fence: unknown,
    ) => ["EVALSHA", s.release.sha, "4", ...k, o, "10000", String(fence)];
    const keep = (r: unknown, i: number) => (fences[i] = r, num(r) > 0);
    await measure(`${tag} acquire: free`, (i) => acq(keys("a", i), owner(i), `a${wid(i)}`), (r, i) => keep(r, i));
    await measure(
      `${tag} release: last hold, no waiter`,
      (i) => rel(keys("a", i), owner(i), fences[i]),
      (r) => num(r) === 2,
    );
    await measure(
      `${tag} acquire: its fence kept by a release moments ago`,
      (i) => acq(keys("a", i), waiter(i), wid(i)),
      (r, i) => keep(r, i),
    );
    await measure(
      `${tag} release: after that re-acquire`,
      (i) => rel(keys("a", i), waiter(i), fences[i]),
      (r) => num(r) === 2,
    );
    for (let i = 0; i < N; i++) fences[i] = await c.sendCommand(acq(keys("b", i), owner(i), `a${wid(i)}`));
    await measure(
      `${tag} acquire: held by another, queue the waiter`,
      (i) => acq(keys("b", i), waiter(i), wid(i), entry(i), "30000", "PUBLISH"),
      Array.isArray,
    );
    await measure(
      `${tag} release: hand over to the queued waiter`,
      (i) => rel(keys("b", i), owner(i), fences[i]),
      (r) => num(r) === 3,
    );
    await measure(
      `${tag} release: a grant not yet claimed`,
      (i) => rel(keys("b", i), waiter(i), ""),
      (r) => num(r) === 2,
    );
    for (let i = 0; i < N; i++) {
      const f = await c.sendCommand(acq(keys("c", i), owner(i), `a${wid(i)}`));
      await c.sendCommand(acq(keys("c", i), waiter(i), wid(i), entry(i), "30000", "PUBLISH"));
      await c.sendCommand(rel(keys("c", i), owner(i), f));
    }
    const ext = (i: number) => ["EVALSHA", s.extend!.sha, "1", keys("c", i)[0], waiter(i), "300000", "", "", "GT"];
    await measure(`${tag} extend: claim a grant`, ext, (r) => num(r) === 1);
    await measure(`${tag} extend: renew`, ext, (r) => num(r) === 1);
    if (s.acquireSet && s.releaseSet) await weighted(tag, s.acquireSet, s.releaseSet, keys, keep);
  }
  await Promise.all([c.quit(), sub.quit()]);
  const counts = new Map<string, number>();
  for (const f of readdirSync(dir)) {
    const t = readFileSync(join(dir, f), "utf8");
    const label = /^desc: Trigger: dump (.*)$/m.exec(t)?.[1], total = /^totals: (\d+)$/m.exec(t)?.[1];
    if (label && total && label !== "skip") counts.set(label, Number(total));
  }
  console.log(
    `\nbench/scripts_instructions.ts: redis-server instructions per call (callgrind), N = ${N} sequential calls\n`,
  );
  console.log("| version | path | instructions/call |");
  console.log("|---|---|---|");
  for (const l of labels) {
    const v = l.slice(0, l.indexOf(" "));
    console.log(
      `| ${names[Number(v.slice(1))]} | ${l.slice(v.length + 1)} | ${
        counts.has(l) ? Math.round(counts.get(l)! / N) : "?"
      } |`,
    );
  }
} finally {
  server.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
}
