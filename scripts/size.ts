/**
 * Bundle size of each entry point: bundled alone with esbuild (minified, ESM, platform neutral, the Redis
 * clients external), then gzipped at level 9. Prints a table and exits 1 if the core entry (mod.ts) is over
 * its gzipped budget. Entries whose source does not exist yet are listed as missing (check_exports fails on
 * those).
 *
 *   node --import tsx scripts/size.ts
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { entries, external } from "../tsup.config.ts";

const CORE = "mod";
// Raised from 8192 to 10,752 when the fault contract landed (bounded calls, claim window, attempt ids, resubscribe:
// +2.3 KB); lowered to 10 KB by issue 10 (lean core), which moved Redlock (0.86 KB) to its own entry, redlease/redlock;
// raised to 10.25 KB when the uncontended path shed promise layers, closures and a fence conversion per release
// (+0.19 KB gzipped; bench/client_cost.ts: 6.0–6.3 → 4.1–5.6 µs and 7.8 → 6.0 KB allocated per acquire + release);
// raised to 11.25 KB by issue 11 (the synchronizer family) for lease.token, resume() and owner strings scoped to a
// client (+0.8 KB, and +0.07 KB for what its review found: same-client resume checks, driver throws); raised to
// 14 KB for shared leases and permits (11,313 → 14,100 B: +2.7 KB, nearly all Lua — the admission of every kind
// inlined where room can free, the holder set, and the acquire, release and extend scripts of set holds — plus
// LeaseKindError and inspect() per kind; 0.3 KB of it is what their review found); raised to 15 KB for leases over
// several names (14,100 → 15,294 B: +1.2 KB — the all-at-once script, the group handle, ordered acquisition, and
// release/extend/withLock over a group; +0.3 KB more for what its review found: retried give-backs, a round started
// over when a name is lost meanwhile, the undo of a late all-at-once reply); raised to 16.5 KB for leader election
// (+1.1 KB — campaign, proclaim, observe and their two scripts; 16,812 B after the set scripts set expiries with one
// command per key instead of two; 16,996 B with what the election's review found: campaigning on when the lease is
// lost before its proclamation, a release that waits for its announcement, observers that unsubscribe when aborted
// mid-subscribe and read again after a resubscribe; 16,936 B once a group's give-back reused the undo's; 17,136 B
// with the error guards, isLeaseLostError and the others, and their Symbol.for brands: +0.2 KB, within it); raised
// to 17.25 KB by issue 12 for the run-time client checks that name the usual mistakes (an un-awaited connect(), an
// unwrapped ioredis or Bun client, a closed node-redis client) before any command: +0.11 KB, 17,245 B with the
// guards; then for what issue 12's review and faults asked of the core: configure() and its logger (+0.3 KB, a
// logger that throws isolated), the `label` acquire option (+0.2 KB: its checks, the labelled owner, inspect()'s
// owners[].label and observe()'s label), a timer per entry in Cloudflare Workers, where a timer belongs to the request
// that set it (+0.08 KB), and Sentinel clients re-checking after node-redis moved their subscriptions (+0.1 KB):
// 18,106 B, budget 18 KB; 18,207 B with what their review found (Redlock releases that settle once decided,
// async loggers, Workers timers never early, stricter label/owner/token checks); raised to 19 KB by issue 13
// (observable leases) for the event hook: configure()'s onEvent, ten typed events built only for a handler, and the
// acquire reply that says a grant was passed on (18,207 → 19,201 B: +1.0 KB); 19,384 B once shared holds and permits
// say it too (+0.18 KB, nearly all the holder set's purge, inlined in every script that frees room); 19.5 KB for
// what holds the events together: a hold and handle told of only once its acquisition was (no end without a start,
// so a held-leases counter never goes below zero), and no clock read for a hold without a handler (19,469 B). Each
// further kind of lease moves it by what it measurably adds, said here. Raised to 20.25 KB by issue 27 (a failed-over
// cluster master's leases back within seconds: 19,869 → 20,496 B, +0.6 KB — node-redis cluster clients asked to
// rediscover their slots when calls to them fail or hang, with the CRC16 that picks a live master's key, their
// sharded subscriptions made again after it, and calls that Redis never ran — CLUSTERDOWN, or queued for a dropped
// node — sent again while their caller waits). Raised to 21 KB for the rest of issue 27 (20,496 → 20,924 B, +0.4 KB):
// outcomes that no longer depend on the order commands run in (a late grant ends its attempt, and a fixed owner's
// next attempt waits for the undo; a hold's `ending` signal, so that no call in flight is sent again after its
// release), and timeouts that count a reply which came while the process was busy (patient shared-timer entries);
// 21,045 B with issue 28's StaleFenceError and isStaleFenceError, which every entry's errors share (+0.12 KB): the
// fenced writes themselves, their scripts included, are in redlease/fence only. Raised to 22 KB by issue 28's lock
// delay (21,186 → 21,930 B, +0.75 KB: nearly all Lua — the delay's field in both hold records and queue entries, read
// wherever a hold's owner is checked, in every script that grants, renews, frees or reports a hold). Raised to 23 KB
// by issue 30 (22,321 → 23,017 B gzipped): the exclusive scripts' fast paths (+0.38 KB, all Lua: the common record told by
// one short match in release and extend, an exclusive handoff without admit(), the busy reply and the re-acquire of a
// name released moments ago without record(); each duplicates what a general path does for the rarer shapes, which
// is what makes it cheap: -10 to -38% of Redis's instructions on those paths), and the client's cost (+0.37 KB: a
// script call as one object that is its own settle state, shared-timer entry and abort listener, and an uncontended
// acquire that resolves from its first reply without an async frame; bench/client_cost.ts: ~6.2 → ~4.4 KB allocated
// per acquire + release). Raised to 24 KB by issue 31 (23,445 → 24,305 B gzipped): an outage told from contention in
// every call (+0.41 KB: RedisUnavailableError for a failed or unanswered call, with the client's last error watched
// as its cause, the hold's last renewal failure kept as the cause of a loss as unreachable, Redlock decided by the
// masters that answered), and unknown option keys refused with the closest valid one (+0.42 KB: each function's key
// list, the loop, and the edit distance of the message); bench/client_cost.ts: 1.65 → 1.64 µs per acquire + release.
// Raised by 295 B by issue 32's watching (24,458 → 24,753 B): the scripts' watch key folded into the EXISTS they make
// anyway and the PUBLISH it allows (about 0.2 KB, all Lua: what lets an unwatched lease pay no command), and observe()
// on the read loop it now shares with watch() (src/_follow.ts); watch() itself is in redlease/watch only.
// Then raised by issue 32's weighted permits (24,458 → 24,967 B gzipped, +0.5 KB, nearly all Lua: the weight in
// hold records and queue entries, the surplus counter kept wherever a set hold is added or dropped, admission by
// weight; plus the `weight` option's checks, LeaseKindError "weight" and inspect()'s weights and permitsTaken). The two
// together, with the watch key in the weighted scripts too: 25,289 B; 25,334 B with what the watch's review found
// (the watch key in acquire_all too, a watcher's read that only lengthens its key, notifications by pcall); 25,367 B
// with issue 33's review: a raw Valkey GLIDE client refused with a TypeError that names glide() (+38 B); then +68 B
// (Lua) from the weights' review: admit() drops a blocked weighted head whose client no longer listens (PUBSUB
// NUMSUB), which else held back the waiters behind it that fit for as long as the holds lasted: 25,450 B together.
// Budget 25 KB.
const CORE_BUDGET_GZIP = 25_600;

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

interface Row {
  entry: string;
  minified?: number;
  gzipped?: number;
}

async function measure(src: string): Promise<{ minified: number; gzipped: number }> {
  const result = await build({
    entryPoints: [join(root, src)],
    absWorkingDir: root,
    bundle: true,
    minify: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    external,
    write: false,
    logLevel: "error",
  });
  const code = result.outputFiles[0].contents;
  return { minified: code.byteLength, gzipped: gzipSync(code, { level: 9 }).byteLength };
}

const rows: Row[] = [];
for (const src of Object.values(entries)) {
  rows.push(existsSync(join(root, src)) ? { entry: src, ...await measure(src) } : { entry: src });
}

const header = ["entry", "minified bytes", "gzipped bytes"];
const cells = rows.map((r) => [r.entry, r.minified?.toString() ?? "missing", r.gzipped?.toString() ?? "missing"]);
const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
const line = (c: string[]) => c.map((v, i) => i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i])).join("  ");
console.log(line(header));
for (const c of cells) console.log(line(c));

const core = rows.find((r) => r.entry === entries[CORE])!;
if (core.gzipped === undefined) {
  console.error(`size budget: ${core.entry} does not exist`);
  process.exit(1);
}
if (core.gzipped > CORE_BUDGET_GZIP) {
  console.error(`size budget exceeded: ${core.entry} is ${core.gzipped} bytes gzipped, budget ${CORE_BUDGET_GZIP}`);
  process.exit(1);
}
console.log(`size budget ok: ${core.entry} is ${core.gzipped} of ${CORE_BUDGET_GZIP} bytes gzipped`);
