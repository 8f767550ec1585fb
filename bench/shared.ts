/**
 * Shared leases (a read-write lock): does read throughput grow with the readers while a writer still gets in? R
 * reader loops (acquire shared → a 5 ms read → release), each on its own client, beside one writer loop (acquire
 * exclusive → a 5 ms write → release → 45 ms pause), for a window per R; and the same with the readers taking the
 * lease exclusively (what a plain lock gives). Prints a markdown table and writes it to bench/results/shared.md.
 *
 *   node --import tsx bench/shared.ts [--window 3000] [--readers 1,2,4,8,16]
 *
 * One process, one client per loop (as separate processes would have), on a throwaway redis-server.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "redis";
import { acquire, release } from "../mod.ts";
import { type Client as NodeRedisClient, sleep, startRedis } from "../harness/redis.ts";
import { pct, r3, sortedF64 } from "./_stats.ts";

const args = process.argv.slice(2);
const flag = (name: string, def: string) => {
  const i = args.indexOf(name);
  return i < 0 ? def : args[i + 1];
};
const WINDOW_MS = Number(flag("--window", "3000"));
const READERS = flag("--readers", "1,2,4,8,16").split(",").map(Number);
const WORK_MS = 5, WRITER_PAUSE_MS = 45;

interface Row {
  mode: "shared" | "exclusive";
  readers: number;
  readsPerSec: number;
  writesPerSec: number;
  writerWaitP50: number;
  writerWaitP99: number;
  readerWaitP99: number;
}

const server = await startRedis([], { label: "bench" });
const connect = async (): Promise<NodeRedisClient> => {
  const c = createClient({ url: server.url });
  c.on("error", () => {});
  return await c.connect() as NodeRedisClient;
};

async function round(mode: Row["mode"], readers: number): Promise<Row> {
  const name = `shared-bench:${mode}:${readers}:${Math.random().toString(36).slice(2)}`;
  const clients = await Promise.all(Array.from({ length: readers + 1 }, connect));
  // Warm up every client on another name (scripts loaded, subscriber open).
  await Promise.all(clients.map(async (c) => await release(await acquire(c, `${name}:warm`, { waitMs: 10_000 }))));
  const end = performance.now() + WINDOW_MS;
  let reads = 0, writes = 0;
  const writerWaits: number[] = [], readerWaits: number[] = [];
  const reader = async (c: NodeRedisClient) => {
    while (performance.now() < end) {
      const t0 = performance.now();
      const l = await acquire(c, name, { waitMs: 30_000, ...(mode === "shared" ? { shared: true } : {}) });
      readerWaits.push(performance.now() - t0);
      await sleep(WORK_MS);
      await release(l);
      reads++;
    }
  };
  const writer = async (c: NodeRedisClient) => {
    while (performance.now() < end) {
      const t0 = performance.now();
      const l = await acquire(c, name, { waitMs: 30_000 });
      writerWaits.push(performance.now() - t0);
      await sleep(WORK_MS);
      await release(l);
      writes++;
      await sleep(WRITER_PAUSE_MS);
    }
  };
  await Promise.all([writer(clients[0]), ...clients.slice(1).map(reader)]);
  await Promise.all(clients.map((c) => c.quit()));
  const ww = sortedF64(writerWaits), rw = sortedF64(readerWaits);
  return {
    mode,
    readers,
    readsPerSec: Math.round(reads / (WINDOW_MS / 1000)),
    writesPerSec: Math.round(writes / (WINDOW_MS / 1000)),
    writerWaitP50: r3(pct(ww, 50)),
    writerWaitP99: r3(pct(ww, 99)),
    readerWaitP99: r3(pct(rw, 99)),
  };
}

const rows: Row[] = [];
try {
  for (const readers of READERS) {
    for (const mode of ["shared", "exclusive"] as const) {
      const r = await round(mode, readers);
      rows.push(r);
      console.error(
        `  ${mode} R=${readers}: ${r.readsPerSec} reads/s, ${r.writesPerSec} writes/s, writer wait p50 ${r.writerWaitP50} ms`,
      );
    }
  }
} finally {
  await server.stop();
}

const md = [
  `# Shared leases: reads and a writer (${new Date().toISOString()})`,
  "",
  `Command: \`node --import tsx bench/shared.ts --window ${WINDOW_MS} --readers ${
    READERS.join(",")
  }\`. R reader loops ` +
  `(a ${WORK_MS} ms read under the lease) and one writer loop (a ${WORK_MS} ms write, then a ${WRITER_PAUSE_MS} ms ` +
  `pause), one client each, ${WINDOW_MS} ms per row, one throwaway redis-server, Node ${process.version}. ` +
  `"shared": readers take \`{ shared: true }\`; "exclusive": readers take the lease exclusively (a plain lock).`,
  "",
  "| readers take | R | reads/s | writes/s | writer wait p50 / p99 ms | reader wait p99 ms |",
  "|---|---|---|---|---|---|",
  ...rows.map((r) =>
    `| ${r.mode} | ${r.readers} | ${r.readsPerSec} | ${r.writesPerSec} | ${r.writerWaitP50} / ${r.writerWaitP99} | ${r.readerWaitP99} |`
  ),
  "",
].join("\n");
writeFileSync(join(import.meta.dirname ?? "bench", "results", "shared.md"), md);
console.log(md);
