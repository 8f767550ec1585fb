/**
 * Differential fuzzer of the lease scripts of two versions (issue 30's review of the Lua fast paths): random
 * sequences of script calls (acquire_set, release_set, extend_set, acquire, release, inspect, force_unlock, and
 * records written by hand that resemble the fast paths' patterns) run against TWO throwaway redis-servers, one
 * loaded with version A's scripts and one with version B's, and every reply and the lease's keys after every call
 * compared modulo time. A version is a git revision (its src/_scripts.ts, read with `git show`), `.` (the working
 * tree's), or `general` (the working tree's with the fast paths of acquire_set and release_set switched off, so that
 * every call takes the general path: the reference for the fast paths of scripts that have no earlier version to
 * compare with, such as weighted permits).
 *
 *   node --import tsx bench/fuzz_set_paths.ts [A=8063f8a^] [B=.] [ops=20000] [seed=1] [lanes=24]
 *   node --import tsx bench/fuzz_set_paths.ts general . 20000     (weighted permits too: both versions know them)
 *
 * With weights (A and B both `.` or `general`), the kinds include k of n permits ("p3w2", "p3w3", "p2w2") in acquire
 * calls and queue entries, and holds are not written by hand (a hand-written hold would have to keep the holder
 * records' surplus, see lua/_holders.lua).
 *
 * Time: short leases (150, 450 ms) expire only while a lane sleeps (a lane runs at most 6 calls, about 20 ms,
 * between sleeps of 300 ms), so both servers see a hold on the same side of its expiry although their calls run a
 * few hundred µs apart. Normalised: every number of 15-17 digits (a fence, a claim deadline) becomes "F<i>", its
 * rank of first appearance on its server in this sequence (so fences compare by order, not value); queue scores
 * drop; hold expiries become ms from the server's TIME; PTTLs and retry times compare within 40 ms. The expired
 * holds still in the holder set are compared apart (their purge is deviation (a) of 8063f8a), and the set
 * record's TTL apart too (deviation (b)). Times in the keys are taken relative to the server's TIME sent just
 * before the call; a difference where the two calls ran more than SKEW ms apart, or that is only in times (by less
 * than SLOW ms), is classed as timing (on a loaded machine one server may run a call much later than the other).
 * A sequence that differs goes on comparing replies only, after a documented deviation; else it ends.
 *
 * Prints every difference with the lane's trace, and a count per class; never asserts.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "redis";
import { type RedisServer, sleep, startRedis } from "../harness/redis.ts";
import { rng } from "../harness/rng.ts";

interface Script {
  readonly sha: string;
  readonly source: string;
}
type Scripts = Record<
  "acquire" | "acquireSet" | "release" | "releaseSet" | "extend" | "extendSet" | "inspect" | "forceUnlock",
  Script
>;

const A = process.argv[2] ?? "8063f8a^", B = process.argv[3] ?? ".";
const OPS = Number(process.argv[4] ?? 20_000),
  SEED = Number(process.argv[5] ?? 1),
  LANES = Number(process.argv[6] ?? 24);

/** Whether both versions know weighted permits (see above). */
const WEIGHTS = [A, B].every((v) => v === "." || v === "general");

async function load(version: string): Promise<Scripts> {
  if (version === ".") return await import("../src/_scripts.ts");
  if (version === "general") {
    const current: Scripts = await import("../src/_scripts.ts");
    // The fast paths' guards, as compacted into src/_scripts.ts, made false.
    const off = (s: Script, guard: string): Script => {
      if (!s.source.includes(guard)) throw new Error(`no fast path guard '${guard}' in the scripts: update the fuzzer`);
      return { sha: "", source: s.source.replace(guard, "if false then") };
    };
    return {
      ...current,
      acquireSet: off(current.acquireSet, "if not ARGV[8]and not string.find(kind,'w',1,true)then"),
      releaseSet: off(current.releaseSet, "if aid==''then"),
    };
  }
  const dir = join(import.meta.dirname, "results", "tmp");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `scripts-${version.replace(/[^\w.-]/g, "_")}.ts`);
  writeFileSync(file, execFileSync("git", ["show", `${version}:src/_scripts.ts`], { encoding: "utf8" }));
  return await import(file);
}

// A hand-written command: "@T<ms>" becomes the server's µs time + ms.
const RAW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local a = {}
for i, v in ipairs(ARGV) do
  a[i] = string.gsub(v, '@T(%-?%d+)', function(x) return string.format('%d', now + tonumber(x) * 1000) end)
end
return redis.call(unpack(a))`;
// The lease's keys as they are, with the server's TIME.
const DUMP = `local t = redis.call('TIME')
local function ty(k) return redis.call('TYPE', k)['ok'] end
local function val(k)
  local ty = ty(k)
  if ty == 'none' then return '<none>' end
  if ty == 'string' then return redis.call('GET', k) end
  if ty == 'zset' then return redis.call('ZRANGE', k, 0, -1, 'WITHSCORES') end
  if ty == 'hash' then return redis.call('HGETALL', k) end
  return '<' .. ty .. '>'
end
local out = { t[1] .. string.format('%06d', tonumber(t[2])) }
for i = 1, 4 do
  table.insert(out, val(KEYS[i]))
  table.insert(out, redis.call('PTTL', KEYS[i]))
end
return out`;

interface Side {
  readonly server: RedisServer;
  readonly c: ReturnType<typeof createClient>;
  readonly scripts: Scripts;
  readonly raw: string;
  readonly dump: string;
}

async function side(scripts: Scripts): Promise<Side> {
  const server = await startRedis([], { label: "fuzz" });
  const c = createClient({ url: server.url }), sub = createClient({ url: server.url });
  for (const x of [c, sub]) x.on("error", () => {});
  await Promise.all([c.connect(), sub.connect()]);
  // The waiters of client "live" hear their grants; those of "dead" have no subscriber (dead entries).
  await sub.pSubscribe("*:w:live", () => {});
  // (Each script by the SHA that SCRIPT LOAD answers: the `general` version's are not the generated ones.)
  const loaded = { ...scripts } as Record<string, Script>;
  for (const [key, s] of Object.entries(scripts) as [string, Script][]) {
    if (typeof s === "object" && s && "source" in s) {
      loaded[key] = { sha: String(await c.sendCommand(["SCRIPT", "LOAD", s.source])), source: s.source };
    }
  }
  scripts = loaded as Scripts;
  const raw = String(await c.sendCommand(["SCRIPT", "LOAD", RAW]));
  const dump = String(await c.sendCommand(["SCRIPT", "LOAD", DUMP]));
  return { server, c, scripts, raw, dump };
}

const sides = [await side(await load(A)), await side(await load(B))] as const;

type Approx = { approx: number };
type Norm = string | number | null | Approx | Norm[] | { [k: string]: Norm };
const TOL = 40;

/** Equal but for the values compared within TOL (any difference there is taken as timing). */
function sameShape(x: Norm, y: Norm): boolean {
  if (x && y && typeof x === "object" && typeof y === "object") {
    if ("approx" in x && "approx" in y) return true;
    if (Array.isArray(x) !== Array.isArray(y)) return false;
    const kx = Object.keys(x), ky = Object.keys(y);
    if (kx.length !== ky.length) return false;
    return kx.every((k) => sameShape((x as Record<string, Norm>)[k] as Norm, (y as Record<string, Norm>)[k] as Norm));
  }
  return x === y;
}

/** The largest difference between the values compared within TOL, of two values of one shape. */
function maxDelta(x: Norm, y: Norm): number {
  if (x && y && typeof x === "object" && typeof y === "object") {
    if ("approx" in x && "approx" in y) return Math.abs((x as Approx).approx - (y as Approx).approx);
    return Math.max(
      0,
      ...Object.keys(x).map((k) =>
        maxDelta((x as Record<string, Norm>)[k] as Norm, (y as Record<string, Norm>)[k] as Norm)
      ),
    );
  }
  return 0;
}
/** A difference of times below this (ms) is taken as one server running a call later than the other. */
const SLOW = 200;
/** Calls run further apart than this (ms) on the two servers may see a hold on either side of its expiry. */
const SKEW = 5;

function same(x: Norm, y: Norm): boolean {
  if (x && y && typeof x === "object" && typeof y === "object") {
    if ("approx" in x && "approx" in y) {
      const [a, b] = [(x as Approx).approx, (y as Approx).approx];
      if ((a <= 0) !== (b <= 0) && Math.abs(a - b) > 2) return false;
      return Math.abs(a - b) <= TOL;
    }
    if (Array.isArray(x) !== Array.isArray(y)) return false;
    const kx = Object.keys(x), ky = Object.keys(y);
    if (kx.length !== ky.length) return false;
    return kx.every((k) => same((x as Record<string, Norm>)[k] as Norm, (y as Record<string, Norm>)[k] as Norm));
  }
  return x === y;
}

/** A lane's fences per server: value -> rank of first appearance. */
class Registry {
  readonly seen = new Map<string, number>();
  readonly list: string[] = [];
  tok(v: string): string {
    let i = this.seen.get(v);
    if (i === undefined) {
      i = this.list.length;
      this.seen.set(v, i);
      this.list.push(v);
    }
    return `F${i}`;
  }
  text(s: string): string {
    return s.replace(/\d{15,17}/g, (m) => this.tok(m));
  }
}

function normReply(r: unknown, reg: Registry): Norm {
  if (r instanceof Error) return { error: r.message.replace(/ script: .*$/s, "").replace(/\s+/g, " ") };
  if (Array.isArray(r)) {
    // acquire's busy/queued reply { -1 - retry, queued µs, created[, passed] }
    if (r.length >= 3 && r.length <= 4 && Number(r[0]) <= 0 && /^\d{15,17}$/.test(String(r[1]))) {
      return ["busy", { approx: -1 - Number(r[0]) }, "T", Number(r[2]), r.length === 4 ? Number(r[3]) : null];
    }
    if (r.length >= 3 && r.length <= 4 && Number(r[0]) > 0 && String(r[1]) === "0") {
      return ["passed", reg.tok(String(r[0])), Number(r[2]), r.length === 4 ? Number(r[3]) : null];
    }
    if (r.length === 4 && Number(r[0]) <= 0 && String(r[1]) === "0") {
      return ["busy-passed", { approx: -1 - Number(r[0]) }];
    }
    return r.map((x) => normReply(x, reg));
  }
  if (typeof r === "number" || (typeof r === "string" && /^-?\d+$/.test(r))) {
    const n = Number(r);
    if (String(r).length >= 15) return reg.tok(String(r));
    if (n < 0 && n < -1) return ["retry", { approx: -1 - n }];
    return n;
  }
  if (typeof r === "string") return reg.text(r);
  return r === null || r === undefined ? null : String(r);
}

function normInspect(r: unknown, reg: Registry): Norm {
  if (!Array.isArray(r)) return normReply(r, reg);
  const out: Norm[] = [
    String(r[0]).length >= 15 ? reg.tok(String(r[0])) : Number(r[0]),
    pttl(r[1]),
    Number(r[2]),
    String(r[3]),
  ];
  for (let i = 4; i + 4 < r.length; i += 5) {
    out.push([
      reg.text(String(r[i])),
      Number(r[i + 1]),
      String(r[i + 2]),
      { approx: Number(r[i + 3]) },
      Number(r[i + 4]),
    ]);
  }
  return out;
}

function pttl(v: unknown): Norm {
  const n = Number(v);
  return n < 0 ? n : { approx: n };
}

interface State {
  h: Norm;
  hTtl: Norm;
  q: Norm;
  qTtl: Norm;
  live: Norm;
  expired: Norm;
  sTtl: Norm;
  dTtl: Norm;
}

function normState(r: unknown[], reg: Registry, at: number): State {
  // Times relative to the call's (so that a slow dump on one side shifts nothing).
  const now = at, shift = (Number(r[0]) - at) / 1000;
  const pttl = (v: unknown): Norm => {
    const n = Number(v);
    return n < 0 ? n : { approx: n + shift };
  };
  const [h, hT, q, qT, s, sT, d, dT] = r.slice(1);
  const live: Norm[] = [], expired: Norm[] = [];
  const recs = new Map<string, string>();
  if (Array.isArray(d)) { for (let i = 0; i < d.length; i += 2) recs.set(String(d[i]), String(d[i + 1])); }
  if (Array.isArray(s)) {
    for (let i = 0; i < s.length; i += 2) {
      const owner = String(s[i]), rel = (Number(s[i + 1]) - now) / 1000;
      const rec = recs.get(owner);
      recs.delete(owner);
      const item: Norm = [reg.text(owner), rec === undefined ? null : reg.text(rec), { approx: rel }];
      (rel > 0 ? live : expired).push(item);
    }
  }
  for (const [o, rec] of recs) live.push([reg.text(o), reg.text(rec), "not in s"]);
  return {
    h: typeof h === "string" ? reg.text(h) : normReply(h, reg),
    hTtl: pttl(hT),
    q: Array.isArray(q) ? q.filter((_, i) => i % 2 === 0).map((x) => reg.text(String(x))) : String(q),
    qTtl: pttl(qT),
    live,
    expired,
    sTtl: pttl(sT),
    dTtl: pttl(dT),
  };
}

// ---- the operations ----
const KINDS = WEIGHTS ? ["s", "p2", "p3", "p3w2", "p3w3", "p2w2"] : ["s", "p2", "p3"];
const LEASES = ["150", "450", "30000"];
interface Op {
  readonly what: string;
  /** The call on one side: [script or raw, keys, args], args may hold "@F<i>" for the lane's fence i. */
  readonly script: keyof Scripts | "raw";
  readonly keys: "all" | "hsd" | "h";
  readonly args: string[];
}

function gen(r: () => number, owners: string[], aids: string[], nfences: number): Op {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
  const owner = pick(owners), aid = pick(aids), kind = pick(KINDS), ms = pick(LEASES);
  const fence = () => (r() < 0.5 || nfences === 0 ? "" : r() < 0.9 ? `@F${Math.floor(r() * nfences)}` : "1234");
  const entry = (k: string, o: string, a: string) => {
    const lag = r() < 0.15 ? "d60" : "";
    const cms = r() < 0.5 ? "100" : "30000";
    return `${r() < 0.8 ? "live" : "dead"}|${a}|${pick(LEASES)}${lag}|${cms}|${k}|${o}`;
  };
  const x = r();
  if (x < 0.34) {
    const waits = r() < 0.4;
    const args = [owner, ms, aid, waits ? entry(kind, owner, aid) : "", r() < 0.9 ? "30000" : "150", "PUBLISH", kind];
    if (r() < 0.1) args.push("60");
    return { what: "acquire_set", script: "acquireSet", keys: "all", args };
  }
  if (x < 0.56) {
    const args = [owner, "10000", fence()];
    const y = r();
    if (y < 0.15) args.push(aid, "", "PUBLISH");
    else if (y < 0.25) args.push("", r() < 0.5 ? entry(kind, owner, aid) : "", "PUBLISH");
    return { what: "release_set", script: "releaseSet", keys: "all", args };
  }
  if (x < 0.64) {
    const args = [owner, ms, fence(), r() < 0.1 ? "1" : "", r() < 0.7 ? "GT" : ""];
    return { what: "extend_set", script: "extendSet", keys: "hsd", args };
  }
  if (x < 0.72) {
    const waits = r() < 0.4, lag = r() < 0.1;
    const args = [owner, ms, aid];
    if (waits || lag || r() < 0.3) args.push(waits ? entry("x", owner, aid) : "", "30000", "PUBLISH");
    if (lag) args.push("60");
    return { what: "acquire", script: "acquire", keys: "all", args };
  }
  if (x < 0.78) {
    const args = [owner, "10000", fence()];
    if (r() < 0.2) args.push(r() < 0.5 ? aid : "", "", "PUBLISH");
    return { what: "release", script: "release", keys: "all", args };
  }
  if (x < 0.80) return { what: "extend", script: "extend", keys: "h", args: [owner, ms, fence(), "", "GT"] };
  if (x < 0.85) return { what: "inspect", script: "inspect", keys: "all", args: [] };
  if (x < 0.86) return { what: "force_unlock", script: "forceUnlock", keys: "all", args: ["10000", "PUBLISH"] };
  // (With weights, no hand-written records of holds: see above. A set record names the kind without its weight.)
  if (WEIGHTS && x < 0.9) return gen(r, owners, aids, nfences);
  const mode = kind.replace(/w\d+$/, "");
  // Records by hand that resemble the fast paths' patterns.
  const F = nfences > 0 && r() < 0.6 ? `@F${Math.floor(r() * nfences)}` : "1000000000000001";
  const y = r();
  const ttl = pick(["150", "450", "30000"]);
  if (y < 0.25) {
    return { what: "raw set record", script: "raw", keys: "h", args: ["SET", "<h>", `${F}/${mode}`, "PX", ttl] };
  }
  if (y < 0.35) return { what: "raw free record", script: "raw", keys: "h", args: ["SET", "<h>", F, "PX", ttl] };
  if (y < 0.45) {
    const rec = `${F}:${aid}:${pick(["1", "2", "12"])}:${r() < 0.2 ? "@T100" : ""}${r() < 0.2 ? "d60" : ""}:${owner}`;
    return { what: "raw exclusive record", script: "raw", keys: "h", args: ["SET", "<h>", rec, "PX", ttl] };
  }
  if (y < 0.8 && !WEIGHTS) {
    const rec = `${F}:${pick([aid, "", "a:b"])}:${pick(["1", "1", "2", "10"])}:${r() < 0.3 ? "1" : ""}:${kind}${
      r() < 0.2 ? ":60" : ""
    }`;
    return {
      what: "raw hold",
      script: "raw",
      keys: "hsd",
      args: ["HOLD", owner, rec, `@T${pick(["150", "450", "30000"])}`],
    };
  }
  if (y < 0.9) {
    return {
      what: "raw queue entry",
      script: "raw",
      keys: "all",
      args: ["ZADD", "<q>", "@T0", entry(kind, owner, aid)],
    };
  }
  return { what: "raw del", script: "raw", keys: "all", args: ["DEL", pick(["<h>", "<s>", "<q>"])] };
}

interface Keys {
  h: string;
  q: string;
  s: string;
  d: string;
}

/** The server µs just before a side's last call (TIME sent right before it on the same connection). */
const callAt = [0, 0];
function stamp(sd: Side): void {
  const j = sides.indexOf(sd);
  sd.c.sendCommand(["TIME"]).then((t) => {
    const [sec, us] = t as string[];
    callAt[j] = Number(sec) * 1e6 + Number(us);
  }, () => {});
}

async function run(sd: Side, op: Op, k: Keys, reg: Registry): Promise<unknown> {
  const args = op.args.map((a) =>
    a.replace(/@F(\d+)/g, (_, i) => reg.list[Number(i)] ?? "1234").replace("<h>", k.h).replace("<q>", k.q).replace(
      "<s>",
      k.s,
    )
  );
  try {
    if (op.script === "raw") {
      if (args[0] === "HOLD") {
        const [, owner, rec, score] = args;
        stamp(sd);
        await sd.c.sendCommand(["EVALSHA", sd.raw, "0", "ZADD", k.s, score, owner]);
        await sd.c.sendCommand(["HSET", k.d, owner, rec]);
        await sd.c.sendCommand(["PEXPIRE", k.s, "31000", "GT"]);
        await sd.c.sendCommand(["PEXPIRE", k.s, "31000", "NX"]);
        await sd.c.sendCommand(["PEXPIRE", k.d, "31000", "GT"]);
        return await sd.c.sendCommand(["PEXPIRE", k.d, "31000", "NX"]);
      }
      stamp(sd);
      const r = await sd.c.sendCommand(["EVALSHA", sd.raw, "0", ...args]);
      if (args[0] === "ZADD") await sd.c.sendCommand(["PEXPIRE", k.q, "30000"]);
      return r;
    }
    const keys = op.keys === "all" ? [k.h, k.q, k.s, k.d] : op.keys === "hsd" ? [k.h, k.s, k.d] : [k.h];
    stamp(sd);
    return await sd.c.sendCommand(["EVALSHA", sd.scripts[op.script].sha, String(keys.length), ...keys, ...args]);
  } catch (e) {
    return e;
  }
}

async function dump(sd: Side, k: Keys): Promise<unknown[]> {
  return await sd.c.sendCommand(["EVALSHA", sd.dump, "4", k.h, k.q, k.s, k.d]) as unknown[];
}

interface Diff {
  lane: number;
  seq: string;
  op: string;
  klass: string;
  detail: string;
  trace: string[];
}
const diffs: Diff[] = [];
let done = 0;
const t0 = Date.now();

async function lane(id: number): Promise<void> {
  const r = rng(SEED * 1000 + id);
  let seqNo = 0;
  while (done < OPS) {
    const name = `fz${id}-${++seqNo}-${SEED}`;
    const k: Keys = { h: `rl:{${name}}`, q: `rl:{${name}}:q`, s: `rl:{${name}}:s`, d: `rl:{${name}}:d` };
    const regs = [new Registry(), new Registry()];
    const owners = ["o1", "o2", "o:3", "12", "o4:d5"].slice(0, 2 + Math.floor(r() * 4));
    const aids = Array.from({ length: 2 + Math.floor(r() * 3) }, (_, i) => `a${id}x${seqNo}x${i}`);
    const trace: string[] = [];
    let diverged = false, handWritten = false;
    const length = 20 + Math.floor(r() * 60);
    let inSegment = 0;
    for (let i = 0; i < length && done < OPS; i++) {
      if (inSegment >= 6 || (inSegment > 0 && r() < 0.25)) {
        await sleep(300);
        trace.push("-- sleep 300");
        inSegment = 0;
      }
      const op = gen(r, owners, aids, Math.min(regs[0].list.length, regs[1].list.length));
      if (op.script === "raw") handWritten = true;
      inSegment++;
      done++;
      const replies = await Promise.all(sides.map((sd, j) => run(sd, op, k, regs[j])));
      // How far apart (ms) the two servers ran this call: beyond SKEW, a difference may be a hold that expired
      // between them.
      const skew = Math.abs(callAt[0] - callAt[1]) / 1000;
      const nr = replies.map((x, j) => op.script === "inspect" ? normInspect(x, regs[j]) : normReply(x, regs[j]));
      const states = await Promise.all(sides.map((sd) => dump(sd, k)));
      const ns = states.map((x, j) => normState(x, regs[j], callAt[j]));
      trace.push(`${op.what} ${JSON.stringify(op.args)} -> ${JSON.stringify(nr[0])} | ${JSON.stringify(nr[1])}`);
      trace.push(`   A ${JSON.stringify(ns[0])}`);
      trace.push(`   B ${JSON.stringify(ns[1])}`);
      const report = (klass0: string, detail: string) => {
        const klass = skew > SKEW && !klass0.startsWith("(") ? `timing (the calls ran ${SKEW}+ ms apart)` : klass0;
        const tag = handWritten ? " [after hand-written records]" : " [library calls only]";
        diffs.push({
          lane: id,
          seq: name,
          op: op.what,
          klass: klass + tag,
          detail: `${detail} (skew ${skew.toFixed(1)} ms)`,
          trace: trace.slice(-40),
        });
      };
      if (!same(nr[0], nr[1])) {
        if (!diverged && sameShape(nr[0], nr[1]) && maxDelta(nr[0], nr[1]) < SLOW) {
          report(
            "timing (a reply's times differ by more than the tolerance)",
            `${JSON.stringify(nr[0])} vs ${JSON.stringify(nr[1])}`,
          );
          break;
        }
        report(
          diverged ? "reply, after a documented deviation" : "reply",
          `${JSON.stringify(nr[0])} vs ${JSON.stringify(nr[1])}`,
        );
        break;
      }
      if (diverged) continue;
      let [a, b] = ns;
      if ((Object.keys(a) as (keyof State)[]).some((f) => !same(a[f], b[f]))) {
        // Taken again, one side after the other: a slow moment on one side is no difference.
        const again: unknown[][] = [];
        for (const sd of sides) again.push(await dump(sd, k));
        [a, b] = again.map((x, j) => normState(x, regs[j], callAt[j]));
        if ((Object.keys(a) as (keyof State)[]).every((f) => same(a[f], b[f]))) continue;
      }
      const fields = (Object.keys(a) as (keyof State)[]).filter((f) => !same(a[f], b[f]));
      if (fields.length === 0) continue;
      const detail = fields.map((f) => `${f}: ${JSON.stringify(a[f])} vs ${JSON.stringify(b[f])}`).join("; ");
      // Deviation (a): a release_set left expired holds unpurged, and so the set record as it was (not the kept
      // fence) where all remaining holds had expired.
      const onlyA = fields.every((f) => f === "expired" || f === "h" || f === "hTtl" || f === "sTtl" || f === "dTtl");
      const bFresh = typeof b.h === "string" && /^F\d+\/[sp]\d*$/.test(b.h);
      if (op.what === "release_set" && onlyA && (fields.includes("expired") || (fields.includes("h") && bFresh))) {
        report("(a) release leaves expired holds / the set record", detail);
        diverged = true;
        continue;
      }
      // Deviation (b): an acquire_set with holds kept the set record's TTL where the general path set it to the
      // latest hold's end.
      if (op.what === "acquire_set" && fields.length === 1 && fields[0] === "hTtl") {
        const [x, y] = [a.hTtl, b.hTtl];
        const longer = typeof x === "object" && typeof y === "object" && x && y && "approx" in x && "approx" in y &&
          (y as Approx).approx > (x as Approx).approx;
        report(
          longer || y === -1
            ? "(b) acquire keeps a longer set record TTL"
            : "acquire: the set record's TTL shorter than the general path's (latest hold)",
          detail,
        );
        diverged = true;
        continue;
      }
      if (
        (Object.keys(a) as (keyof State)[]).every((f) => sameShape(a[f], b[f]) && maxDelta(a[f], b[f]) < SLOW)
      ) {
        // One server ran the call that much later than the other (the machine is shared): times only.
        report("timing (a state's times differ by more than the tolerance)", JSON.stringify([a, b]));
        break;
      }
      report("state", detail);
      break;
    }
  }
}

await Promise.all(Array.from({ length: LANES }, (_, i) => lane(i)));
const byClass = new Map<string, Diff[]>();
for (const d of diffs) byClass.set(d.klass, [...(byClass.get(d.klass) ?? []), d]);
for (const [klass, ds] of byClass) {
  console.log(`\n==== ${klass}: ${ds.length}`);
  for (const d of ds.slice(0, Number(process.env.SHOW ?? 3))) {
    console.log(`-- lane ${d.lane} ${d.seq} at ${d.op}: ${d.detail}`);
    console.log(d.trace.join("\n"));
  }
}
console.log(
  `\n${done} operations (each on both servers) in ${
    ((Date.now() - t0) / 1000).toFixed(0)
  } s, seed ${SEED}, A=${A}, B=${B}`,
);
for (const [klass, ds] of byClass) console.log(`  ${klass}: ${ds.length}`);
for (const sd of sides) await sd.server.stop();
process.exit(0);
