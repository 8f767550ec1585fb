/**
 * Client-side cost of an uncontended acquire + release, without Redis: the library's own JavaScript per cycle and the
 * bytes it allocates, measured against a Driver whose every reply is already resolved (the acquire script's fresh
 * fence, then the release script's "freed"). It isolates what B2 cannot: there the client's work and Redis's take
 * turns on the same cores, and run-to-run noise hides a change of a few percent. Prints; never asserts.
 *
 *   node --import tsx bench/client_cost.ts [tree=. …] [--cycles 100000] [--reps 9]
 *   node --import tsx bench/client_cost.ts [tree=. …] --contended [--cycles 20000] [--reps 9]
 *   … [--sites N]: also the N functions that allocate the most (bytes per cycle, from the sampled rep)
 *
 * A tree written `<tree>+events` is measured with an event handler that counts every event by its type
 * (configure(driver, { onEvent })): `. .+events` is the cost of the hook itself; `<tree>+otel` with redlease/otel's
 * handler on the OpenTelemetry SDK (bench/_otel.ts: every acquire recorded and traced); `<tree>+metrics` with its
 * metrics only.
 *
 * Each tree given (a checkout of redlease: this one, or another commit's from `git worktree add /tmp/x <ref>`) has its
 * mod.ts bundled by esbuild as the benchmark bundles it (so no loader's helpers are timed), and the bundles are
 * measured in alternation in one process, so they share the machine's state; the median of the reps is printed.
 * Allocation is sampled by V8's heap profiler (every 512 bytes, objects collected since included) over one rep.
 *
 * `--contended` measures instead one worker's share of a contended handoff, as each B3 worker does it at W = 2: the
 * acquire is queued (the driver answers "held, queued now"), the grant comes as a message on the waiter channel a
 * turn later (setImmediate, as a socket's data would), the waiter takes it without a round trip, and the release
 * hands the lease on (the driver answers "handed over"). The next acquire of the name queues at once, as a client
 * that waited there moments ago does. One setImmediate per cycle is part of every tree's figure.
 */
import { Session } from "node:inspector/promises";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { bundleRedlease } from "./_bundle.ts";
import type { Driver } from "../src/driver.ts";
import { otelHandler } from "./_otel.ts";

const args = process.argv.slice(2);
const flag = (name: string, def: number) => {
  const i = args.indexOf(name);
  return i < 0 ? def : Number(args.splice(i, 2)[1]);
};
const CONTENDED = args.includes("--contended");
if (CONTENDED) args.splice(args.indexOf("--contended"), 1);
const SITES = flag("--sites", 0); // print the N functions that allocate the most (bytes per cycle)
const CYCLES = flag("--cycles", CONTENDED ? 20_000 : 100_000), REPS = flag("--reps", 9);
const trees = args.length ? args : ["."];
const TMP = join(fileURLToPath(new URL(".", import.meta.url)), "results", "tmp");

type Lib = {
  // deno-lint-ignore no-explicit-any
  acquire(d: Driver, name: string, o: object): Promise<any>;
  release(l: unknown): Promise<boolean>;
  configure(d: Driver, o: object): void;
};

let fence = 1_732_420_000_000_000;
/** A driver that answers at once: a fresh fence (as a string, as Redis's reply is) to acquire, 2 ("freed") to release. */
const driver = (): Driver => ({
  // The release script's second argument is the fence record's retention (10000); acquire's is the lease ms.
  evalScript: (_sha, _keys, a) => Promise.resolve(a[1] === "10000" ? 2 : String(++fence)),
  loadScript: () => Promise.resolve(""),
});

/**
 * A driver for `--contended`: the acquire script queues every call (-1 - the holder's PTTL, the server µs it was
 * queued at, 1: queued by this call), and its grant comes a turn later on the channel subscribed, as the release
 * script of the holder ahead would publish it ("<attempt>:<fence>:<queued µs>:<granted µs>"); release answers 3. A
 * plain try (no queue entry: a client's first acquire of the name) finds the lease held.
 */
const contendedDriver = (): Driver => {
  const listeners = new Map<string, (message: string) => void>();
  let us = 1_732_420_000_000_000;
  return {
    evalScript(_sha, keys, a) {
      if (a[1] === "10000") return Promise.resolve(3); // release: handed over to the next waiter
      if (!a[3]) return Promise.resolve(-1 - 30_000); // a plain try (the first acquire): held by another
      const at = ++us, listener = listeners.get(`${keys[0]}:w:${a[3].slice(0, a[3].indexOf("|"))}`);
      if (!listener) throw new Error("client_cost --contended: the acquire did not queue on a subscribed channel");
      setImmediate(() => listener(`${a[2]}:${++fence}:${at}:${++us}`));
      return Promise.resolve([-1 - 30_000, String(at), 1]); // (the score comes back as a bulk string)
    },
    loadScript: () => Promise.resolve(""),
    subscribe: (channel, listener) => (listeners.set(channel, listener), Promise.resolve()),
    unsubscribe: (channel) => (listeners.delete(channel), Promise.resolve()),
  };
};

async function cycles(lib: Lib, d: Driver, n: number): Promise<number> {
  const t0 = performance.now();
  if (CONTENDED) {
    for (let i = 0; i < n; i++) await lib.release(await lib.acquire(d, "contended", { waitMs: 10_000 }));
  } else {
    for (let i = 0; i < n; i++) await lib.release(await lib.acquire(d, `n${i & 1023}`, { waitMs: 0 }));
  }
  return (performance.now() - t0) * 1000 / n;
}

mkdirSync(TMP, { recursive: true });
const libs = await Promise.all(trees.map(async (name, i) => {
  const hook = /\+(events|otel|metrics)$/.exec(name)?.[1];
  const tree = hook ? name.slice(0, -hook.length - 1) : name;
  const outfile = join(TMP, `client-cost-${i}.mjs`);
  await bundleRedlease(resolve(tree), outfile);
  const lib = await import(pathToFileURL(outfile).href) as Lib, d = CONTENDED ? contendedDriver() : driver();
  if (hook === "events") {
    const counts: Record<string, number> = {};
    lib.configure(d, { onEvent: (e: { type: string }) => void (counts[e.type] = (counts[e.type] ?? 0) + 1) });
  } else if (hook) lib.configure(d, { onEvent: await otelHandler(hook === "metrics") });
  return {
    name,
    lib,
    d,
    us: [] as number[],
    bytes: 0,
  };
}));
for (const l of libs) await cycles(l.lib, l.d, CYCLES); // warm-up: every path optimised before measuring
for (let r = 0; r < REPS; r++) {
  for (const l of (r % 2 ? [...libs].reverse() : libs)) l.us.push(await cycles(l.lib, l.d, CYCLES));
}

const session = new Session();
session.connect();
await session.post("HeapProfiler.enable");
for (const l of libs) {
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 512,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await cycles(l.lib, l.d, CYCLES);
  const { profile } = await session.post("HeapProfiler.stopSampling");
  let total = 0;
  const walk = (n: { selfSize: number; children: typeof n[] }): void => {
    total += n.selfSize;
    n.children.forEach(walk);
  };
  walk(profile.head as never);
  l.bytes = total / CYCLES;
  if (SITES) {
    const by = new Map<string, number>();
    type Node = {
      selfSize: number;
      callFrame: { functionName: string; url: string; lineNumber: number };
      children: Node[];
    };
    const site = (n: Node): void => {
      const k = `${n.callFrame.functionName || "(anonymous)"} ${n.callFrame.url.split("/").pop()}:${
        n.callFrame.lineNumber + 1
      }`;
      by.set(k, (by.get(k) ?? 0) + n.selfSize);
      n.children.forEach(site);
    };
    site(profile.head as never);
    console.log(`${l.name}: the ${SITES} functions that allocate the most, bytes per cycle`);
    for (const [k, b] of [...by].sort((a, b) => b[1] - a[1]).slice(0, SITES)) {
      console.log(`  ${(b / CYCLES).toFixed(0).padStart(6)}  ${k}`);
    }
  }
}
session.disconnect();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(
  `${
    CONTENDED
      ? "contended acquire (queued, granted by message a turn later) + release (handed over), against a fake driver"
      : "acquire + release against an already-resolved driver"
  }, ${CYCLES} cycles × ${REPS} reps, Node ${process.version}`,
);
for (const l of libs) {
  console.log(
    `${l.name}: ${median(l.us).toFixed(2)} µs per cycle (reps ${l.us.map((x) => x.toFixed(2)).join(", ")}); ` +
      `~${Math.round(l.bytes)} bytes allocated per cycle`,
  );
}
