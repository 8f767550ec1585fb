/**
 * Chaos for watch() (issue 32): no change missed across subscriber resets.
 *
 *   node --import tsx chaos/watch.ts [--ms 12000] [--kind exclusive|permits] [--every 400] [--pause 250]
 *     [--out chaos/results/watch.md]
 *
 * Three workers (node-redis v4, straight to the lock server) take one lease in turn, hold it 300–700 ms and release
 * it, or (one hold in five) abandon it to expire (lease 1500 ms). A watcher (node-redis v4) reaches the server through
 * the chaos proxy (chaos/_proxy.ts), which every `--every` ms resets the watcher's subscriber connection and refuses
 * new connections for `--pause` ms, so that the grant and release messages sent meanwhile reach nobody (node-redis
 * reconnects with a backoff: the outage lasts until it is subscribed again). The workers log each hold (owner, fence,
 * start, end, released or expired); the watcher logs what it yields. Its heartbeat is a minute, so that what it finds
 * is found by a message, at a TTL's end, or by its read after a reconnect.
 *
 * Checks (all must hold): every hold live at some moment outside the outages (from a reset until the watcher is
 * subscribed again, plus 100 ms for its read) is reported granted, and its end is reported; nothing is reported that
 * did not happen (every reported holder is a hold of the log, granted before it ends); the end's kind (released or
 * expired) is the log's, except for holds whose end fell in an outage (counted); the last state reported is free,
 * as the server says. Holds wholly inside an outage may be missed by design (docs/watch.md): counted, not failed.
 */
import { createClient } from "redis";
import { writeFileSync } from "node:fs";
import { acquire, inspect, release } from "../mod.ts";
import { type LeaseChange, watch } from "../src/watch.ts";
import { stateOf } from "../src/_client.ts";
import { startRedis } from "../harness/redis.ts";
import { rng as seeded } from "../harness/rng.ts";
import { startProxy } from "./_proxy.ts";

interface Hold {
  owner: string;
  fence: number;
  from: number;
  to: number;
  how: "released" | "expired";
}

export interface WatchChaosResult {
  readonly kind: string;
  readonly ms: number;
  readonly resets: number;
  readonly holds: number;
  /** Grants and ends that happened during an outage (their messages reached nobody). */
  readonly changesInOutage: number;
  /** Holds live outside the outages: each must be reported, granted and ended. */
  readonly observable: number;
  readonly missedObservable: number;
  readonly missedEndsObservable: number;
  /** Holds wholly inside an outage that were not reported (allowed). */
  readonly missedInOutage: number;
  readonly phantom: number;
  /** Ends reported as the other kind: within an outage (allowed), and outside one (must be 0). */
  readonly wrongEndInOutage: number;
  readonly wrongEnd: number;
  readonly lastStateFree: boolean;
  readonly ok: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// Long: the setup, the workers, the injector and the checks of one run, in the order they happen.
export async function runWatchChaos(
  o: {
    ms?: number;
    kind?: "exclusive" | "permits";
    everyMs?: number;
    pauseMs?: number;
    /** How long the watcher's read after it is subscribed again may take: the outage lasts that much longer. */
    readMs?: number;
    seed?: number;
  } = {},
): Promise<WatchChaosResult> {
  const ms = o.ms ?? 12_000, kind = o.kind ?? "exclusive", everyMs = o.everyMs ?? 400, pauseMs = o.pauseMs ?? 250;
  const rng = seeded(o.seed ?? 32);
  const srv = await startRedis();
  const proxy = await startProxy({ port: srv.port });
  const connect = (url: string) => createClient({ url }).on("error", () => {}).connect();
  const workers = await Promise.all([0, 1, 2].map(() => connect(srv.url)));
  const watcher = await connect(proxy.url);
  const name = `watch-chaos-${kind}`;
  const options = kind === "permits" ? { permits: 2 } : {};
  const holds: Hold[] = [];
  const seen: Array<{ at: number; c: LeaseChange }> = [];
  const outages: Array<[number, number]> = [];
  // An outage ends once the watcher is subscribed again (and has had time to read), however many resets it spanned.
  stateOf(watcher).resubscribed.add(() => {
    for (const open of outages) if (open[1] === Infinity) open[1] = performance.now() + (o.readMs ?? 100);
  });
  const stop = new AbortController();
  const watching = (async () => {
    // (A heartbeat of a minute: what is found is found by a message, a TTL's end, or the read after a reconnect.)
    const changes = watch(watcher, name, { signal: stop.signal, pollMs: 60_000 });
    for await (const c of changes) seen.push({ at: performance.now(), c });
  })();
  while (seen.length === 0) await sleep(5);
  const end = performance.now() + ms;
  const work = workers.map(async (c) => {
    while (performance.now() < end) {
      const lease = await acquire(c, name, { ...options, leaseMs: 1_500, waitMs: 5_000 }).catch(() => undefined);
      if (!lease) continue;
      const hold: Hold = { owner: lease.owner, fence: lease.fence, from: performance.now(), to: 0, how: "released" };
      holds.push(hold);
      if (rng() < 0.2) {
        hold.how = "expired";
        await new Promise((r) => lease.signal.addEventListener("abort", r, { once: true }));
        await sleep(60); // its TTL in Redis ends just after the local deadline
      } else {
        await sleep(300 + rng() * 400);
        await release(lease);
      }
      hold.to = performance.now();
    }
  });
  let resets = 0;
  const inject = (async () => {
    for (let t = performance.now() + everyMs; t < end - 500; t += everyMs) {
      await sleep(t - performance.now());
      proxy.pause();
      outages.push([performance.now(), Infinity]);
      resets += proxy.reset({ kind: "subscriber" });
      await sleep(pauseMs);
      proxy.resume();
      // (Closed once the watcher is subscribed again; never later than the next reset.)
      while (outages.at(-1)![1] === Infinity && performance.now() < t + everyMs - 50) await sleep(5);
    }
  })();
  await Promise.all([...work, inject]);
  await sleep(1_700); // the last expiry, read
  stop.abort();
  await watching;
  const server = await inspect(workers[0], name);
  const result = check(kind, ms, resets, holds, seen, outages, !server.held);
  await Promise.all([...workers, watcher].map((c) => c.disconnect().catch(() => {})));
  await proxy.close();
  await srv.stop();
  return result;
}

// Long: one pass per check, each a few lines.
function check(
  kind: string,
  ms: number,
  resets: number,
  holds: Hold[],
  seen: Array<{ at: number; c: LeaseChange }>,
  outages: Array<[number, number]>,
  serverFree: boolean,
): WatchChaosResult {
  const inOutage = (t: number) => outages.some(([a, b]) => t >= a && t <= b);
  // Live at some moment outside every outage: its span is not inside one outage.
  const observable = (h: Hold) => !outages.some(([a, b]) => h.from >= a && h.to <= b);
  const byOwner = new Map(holds.map((h) => [h.owner, h]));
  let missedObservable = 0, missedEndsObservable = 0, missedInOutage = 0, phantom = 0;
  let wrongEnd = 0, wrongEndInOutage = 0;
  for (const h of holds) {
    const granted = seen.find(({ c }) => c.type === "granted" && c.holder.owner === h.owner);
    const ended = seen.find(({ c }) => (c.type === "released" || c.type === "expired") && c.holder.owner === h.owner);
    if (!granted) {
      if (observable(h)) missedObservable++;
      else missedInOutage++;
      continue;
    }
    if (!ended) {
      if (observable(h)) missedEndsObservable++;
      continue;
    }
    if (ended.c.type !== h.how) {
      if (inOutage(h.to)) wrongEndInOutage++;
      else wrongEnd++;
    }
  }
  for (const { c } of seen) {
    if (c.type !== "granted" && c.type !== "released" && c.type !== "expired") continue;
    if (!byOwner.has(c.holder.owner)) phantom++;
  }
  const last = seen.at(-1)?.c;
  const lastStateFree = last !== undefined && !last.info.held && serverFree;
  const ok = missedObservable === 0 && missedEndsObservable === 0 && phantom === 0 && wrongEnd === 0 &&
    lastStateFree && resets > 0;
  return {
    kind,
    ms,
    resets,
    holds: holds.length,
    changesInOutage: holds.filter((h) => inOutage(h.from)).length + holds.filter((h) => inOutage(h.to)).length,
    observable: holds.filter(observable).length,
    missedObservable,
    missedEndsObservable,
    missedInOutage,
    phantom,
    wrongEndInOutage,
    wrongEnd,
    lastStateFree,
    ok,
  };
}

if (process.argv[1]?.endsWith("chaos/watch.ts")) {
  const arg = (k: string, d: string) => {
    const i = process.argv.indexOf(`--${k}`);
    return i < 0 ? d : process.argv[i + 1];
  };
  const out = arg("out", "");
  const rows: WatchChaosResult[] = [];
  const kinds = arg("kind", "exclusive,permits").split(",") as Array<"exclusive" | "permits">;
  for (const kind of kinds) {
    const r = await runWatchChaos({
      ms: Number(arg("ms", "12000")),
      kind,
      everyMs: Number(arg("every", "400")),
      pauseMs: Number(arg("pause", "250")),
    });
    console.log(JSON.stringify(r));
    rows.push(r);
  }
  if (out) {
    const keys = Object.keys(rows[0]) as Array<keyof WatchChaosResult>;
    const md = [
      "# chaos: watch() across subscriber resets",
      "",
      `\`node --import tsx chaos/watch.ts${process.argv.slice(2).map((a) => ` ${a}`).join("")}\` (${
        new Date().toISOString()
      }, Node ${process.version}); see chaos/watch.ts for what each column checks.`,
      "",
      `| ${keys.join(" | ")} |`,
      `| ${keys.map(() => "---").join(" | ")} |`,
      ...rows.map((r) => `| ${keys.map((k) => String(r[k])).join(" | ")} |`),
      "",
    ].join("\n");
    writeFileSync(out, md);
  }
  process.exit(rows.every((r) => r.ok) ? 0 : 1);
}
