// Harness: a throwaway Redis Sentinel setup on free loopback ports (harness/redis.ts starts every
// process): a master, its replicas (in sync before startSentinel() returns) and sentinels monitoring it, with master
// kills and failover waits for the tests. Administrative commands go over the one-shot RESP client (resp.ts).
//
//   const s = await startSentinel();                // master + 1 replica + 3 sentinels
//   const t = await s.killMaster();
//   const newPort = await s.waitForFailover(s.master.port);
//   await s.stop();
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { createSentinel } from "redis5";
import { Redis as IORedis, type RedisOptions as IORedisOptions } from "ioredis";
import { removeDir, tempDir } from "./cleanup.ts";
import { type Client, connectClient, type RedisServer, startServer } from "./redis.ts";
import { type Arg, command, info, pairs, type Reply } from "./resp.ts";
import { ownedBy, waitUntil, withTimeout } from "./wait.ts";

function makeSentinelClient(options: Parameters<typeof createSentinel>[0]) {
  return createSentinel(options);
}
export type SentinelClient = ReturnType<typeof makeSentinelClient>;
type SentinelClientOptions = Parameters<typeof createSentinel>[0];

export interface ProcInfo {
  readonly port: number;
  readonly pid: number;
  /** Whether the process is still running. */
  readonly alive: boolean;
}

export interface SentinelStartOptions {
  replicas?: number;
  sentinels?: number;
  /** Sentinel down-after-milliseconds (default 1000; 2000 with two replicas or more: see startSentinel). */
  downAfterMs?: number;
  failoverTimeoutMs?: number;
  /**
   * The name the sentinels monitor the master under (default `m-<random>`: unique per setup, so that sentinels of
   * another setup, in this process or another, never take this one's hello messages or config as their own).
   */
  masterName?: string;
  /** Sentinel quorum (default min(2, sentinels)). */
  quorum?: number;
  /** Readiness timeout for replication sync and sentinel discovery (default 30000). */
  readyTimeoutMs?: number;
}

export interface StartedSentinel {
  /** The master at startup (after a failover, see currentMaster()). */
  readonly master: ProcInfo;
  readonly replicas: ProcInfo[];
  readonly sentinels: ProcInfo[];
  readonly masterName: string;
  readonly dir: string;
  /** The master according to the first sentinel that answers SENTINEL GET-MASTER-ADDR-BY-NAME. */
  currentMaster(): Promise<{ host: string; port: number }>;
  /** SIGKILL the current master; returns performance.now() taken right after the kill. */
  killMaster(): Promise<number>;
  /** SIGKILL one data node or sentinel by port. */
  kill(port: number): Promise<void>;
  /** Resolve with the new master port once a sentinel names a master other than oldPort and it reports role:master. */
  waitForFailover(oldPort: number, timeoutMs?: number): Promise<number>;
  /** A plain connected node-redis v4 client; disconnected by stop(). */
  nodeClient(port: number): Promise<Client>;
  /** A connected node-redis v5 sentinel client (all sentinels as root nodes); destroyed by stop(). */
  sentinelClient(options?: Partial<SentinelClientOptions>): Promise<SentinelClient>;
  /** A connected (ready) ioredis client in sentinel mode; disconnected by stop(). */
  ioredisClient(options?: IORedisOptions): Promise<IORedis>;
  /** Send one raw command to a data node or sentinel. */
  command(port: number, ...args: Arg[]): Promise<Reply>;
  /**
   * What every process of the setup says now, for a failure message: ROLE, INFO replication (data nodes), SENTINEL
   * MASTER/REPLICAS and MYID (sentinels), CLIENT LIST (count and each client's name, address and last command: a
   * sentinel connection names its sentinel), and the tail of its log (every sentinel event: +sdown, +switch-master,
   * +fix-slave-config, +convert-to-slave ...; a replica's sync, PSYNC and lost links), each line timestamped.
   */
  diagnose(): Promise<string>;
  stop(): Promise<void>;
}

function procInfo(p: RedisServer): ProcInfo {
  return {
    port: p.port,
    pid: p.pid,
    get alive() {
      return !p.exited;
    },
  };
}

/** After the defaults of harness/redis.ts (port, bind, no persistence, dir). */
function dataNodeArgs(replicaOf?: number) {
  return ({ port }: { port: number }) => [
    "--dbfilename",
    `dump-${port}.rdb`,
    "--repl-diskless-sync-delay",
    "0",
    ...(replicaOf ? ["--replicaof", "127.0.0.1", String(replicaOf)] : []),
  ];
}

/**
 * Start a master, `replicas` replicas (in sync before returning) and `sentinels` sentinels monitoring it as
 * `masterName`, and wait until every sentinel sees the master up, all replicas and all other sentinels.
 */
export async function startSentinel(opts: SentinelStartOptions = {}): Promise<StartedSentinel> {
  const nReplicas = opts.replicas ?? 1;
  const nSentinels = opts.sentinels ?? 3;
  // With two replicas or more, 1000 ms leaves Sentinel (7.0) a race that fails over a second time: on +switch-master a
  // sentinel resets the master's link (its pending-ping clock starts then, and it may fail over again at once), but it
  // reconnects at most once a second, so the first PONG from the new master can come more than 1000 ms later: +sdown,
  // and +odown at once from the other sentinels' "down" replies about the old master (kept 5 s), then a failover to
  // the other replica. Seen in the all-kinds failover test (Deno): "+switch-master ... 44175 ... 39959" at 19.469, then
  // "+sdown master ... 39959" and "+odown ... #quorum 3/2" at 20.473, and 41019 promoted. 2000 ms leaves the
  // reconnect a second. With one replica there is nobody to promote a second time, and 1000 ms keeps failovers short.
  const downAfterMs = opts.downAfterMs ?? (nReplicas >= 2 ? 2000 : 1000);
  const failoverTimeoutMs = opts.failoverTimeoutMs ?? 5000;
  const masterName = opts.masterName ?? `m-${crypto.randomUUID().slice(0, 8)}`;
  const quorum = opts.quorum ?? Math.min(2, nSentinels);
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  if (nSentinels < 1 || nReplicas < 0) throw new Error("startSentinel: need sentinels >= 1, replicas >= 0");

  const dir = tempDir("sentinel");
  const { procs, closers, stop: stopAll } = ownedBy<RedisServer>(dir, removeDir);

  try {
    const master = await startServer({ kind: "master", dir, args: dataNodeArgs() });
    procs.push(master);
    const replicas = await Promise.all(
      Array.from({ length: nReplicas }, () => startServer({ kind: "replica", dir, args: dataNodeArgs(master.port) })),
    );
    procs.push(...replicas);

    await waitUntil("replicas to be in sync", readyTimeoutMs, async () => {
      const r = await info(master.port, "replication");
      if (Number(r.connected_slaves) !== nReplicas) return `connected_slaves:${r.connected_slaves}`;
      for (let i = 0; i < nReplicas; i++) {
        const f = Object.fromEntries((r[`slave${i}`] ?? "").split(",").map((kv) => kv.split("=") as [string, string]));
        if (f.state !== "online") return `slave${i} state=${f.state}`;
        if (f.offset !== r.master_repl_offset) return `slave${i} offset ${f.offset} != ${r.master_repl_offset}`;
      }
      for (const rp of replicas) {
        const ri = await info(rp.port, "replication");
        if (ri.master_link_status !== "up") return `${rp.port}: master_link_status:${ri.master_link_status}`;
      }
      return true;
    });

    const sentinels = await Promise.all(Array.from({ length: nSentinels }, () =>
      startServer({
        kind: "sentinel",
        dir,
        argv: ({ port }) => {
          const conf = join(dir, `sentinel-${port}.conf`);
          writeFileSync(
            conf,
            [
              `port ${port}`,
              "bind 127.0.0.1",
              `dir ${dir}`,
              `sentinel monitor ${masterName} 127.0.0.1 ${master.port} ${quorum}`,
              `sentinel down-after-milliseconds ${masterName} ${downAfterMs}`,
              `sentinel failover-timeout ${masterName} ${failoverTimeoutMs}`,
              `sentinel parallel-syncs ${masterName} 1`,
              // Every event (+sdown, +failover-*, +switch-master, +fix-slave-config ...) on stdout, kept by the harness
              // for diagnose().
              'logfile ""',
              "loglevel notice",
              "",
            ].join("\n"),
          );
          return [conf, "--sentinel"];
        },
      })));
    procs.push(...sentinels);

    await waitUntil("sentinels to discover replicas and each other", readyTimeoutMs, async () => {
      for (const s of sentinels) {
        const m = pairs(await command(s.port, ["SENTINEL", "MASTER", masterName]));
        if (m.flags !== "master") return `sentinel ${s.port}: master flags ${m.flags}`;
        const reps = (await command(s.port, ["SENTINEL", "REPLICAS", masterName]) as Reply[]).map(pairs)
          .filter((r) => !/s_down|o_down|disconnected/.test(r.flags ?? ""));
        if (reps.length < nReplicas) return `sentinel ${s.port} knows ${reps.length}/${nReplicas} replicas`;
        const others = (await command(s.port, ["SENTINEL", "SENTINELS", masterName]) as Reply[]).map(pairs)
          .filter((r) => !/s_down|disconnected/.test(r.flags ?? ""));
        if (others.length < nSentinels - 1) {
          return `sentinel ${s.port} knows ${others.length}/${nSentinels - 1} sentinels`;
        }
      }
      await command(sentinels[0]!.port, ["SENTINEL", "CKQUORUM", masterName]);
      return true;
    }, 200);

    const dataProcs = [master, ...replicas];
    const byPort = (port: number) => {
      const p = procs.find((x) => x.port === port);
      if (!p) throw new Error(`no process of this setup on port ${port}`);
      return p;
    };
    const sentinelRootNodes = sentinels.map((s) => ({ host: "127.0.0.1", port: s.port }));

    const currentMaster = async () => {
      let lastErr: unknown;
      for (const s of sentinels) {
        if (s.exited) continue;
        try {
          const [host, port] = await command(s.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName]) as string[];
          return { host: host!, port: Number(port) };
        } catch (e) {
          lastErr = e;
        }
      }
      throw new Error(`no sentinel answered GET-MASTER-ADDR-BY-NAME: ${String(lastErr)}`);
    };

    const api: StartedSentinel = {
      master: procInfo(master),
      replicas: replicas.map(procInfo),
      sentinels: sentinels.map(procInfo),
      masterName,
      dir,
      currentMaster,
      async killMaster() {
        const { port } = await currentMaster();
        const p = dataProcs.find((x) => x.port === port);
        if (!p) throw new Error(`sentinels name ${port} as master, which is not a node of this setup`);
        if (p.exited) throw new Error(`master ${port} (pid ${p.pid}) is already dead`);
        process.kill(p.pid, "SIGKILL");
        const t = performance.now();
        await withTimeout(p.exit, 5000, `master pid ${p.pid} exit`).catch(() => {});
        return t;
      },
      async kill(port) {
        await byPort(port).kill();
      },
      async waitForFailover(oldPort, timeoutMs = 30_000) {
        let found = 0;
        await waitUntil(`a failover away from ${oldPort}`, timeoutMs, async () => {
          let reason = "no sentinel answered";
          for (const s of sentinels) {
            if (s.exited) continue;
            let port: number;
            try {
              const r = await command(s.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName], { timeoutMs: 1000 });
              port = Number((r as string[])[1]);
            } catch (e) {
              reason = (e as Error).message;
              continue;
            }
            if (port === oldPort) {
              const m = pairs(await command(s.port, ["SENTINEL", "MASTER", masterName]).catch((): Reply => []));
              reason = `sentinel ${s.port} still names ${oldPort} (flags ${m.flags}, failover-state ${
                m["failover-state"] ?? "-"
              })`;
              continue;
            }
            const role = (await info(port, "replication").catch(() => ({} as Record<string, string>))).role;
            if (role === "master") {
              found = port;
              return true;
            }
            reason = `sentinel ${s.port} names ${port}, which reports role:${role}`;
          }
          return reason;
        }, 50);
        return found;
      },
      nodeClient: (port) => connectClient(byPort(port).url, closers),
      async sentinelClient(options = {}) {
        const c = createSentinel({ name: masterName, sentinelRootNodes, ...options } as SentinelClientOptions);
        c.on("error", () => {});
        c.on("client-error", () => {});
        await c.connect();
        closers.push(() => c.destroy());
        return c;
      },
      async ioredisClient(options = {}) {
        const c = new IORedis({ sentinels: sentinelRootNodes, name: masterName, lazyConnect: true, ...options });
        c.on("error", () => {});
        closers.push(() => Promise.resolve(c.disconnect()));
        await c.connect();
        return c;
      },
      command: (port, ...a) => command(port, a),
      diagnose: async () => {
        const now = await currentMaster().then((m) => `${m.port}`, (e: Error) => `? (${e.message})`);
        return `${await diagnose(procs, masterName, dir)}\n=== the sentinels name the master at ${now} ===`;
      },
      stop: stopAll,
    };
    return api;
  } catch (e) {
    const logs = procs.map((p) => `--- ${p.kind} ${p.port} (pid ${p.pid}) ---\n${p.log().slice(-3000)}`).join("\n");
    await stopAll();
    throw new Error(`startSentinel failed: ${(e as Error).message}\n${logs}`);
  }
}

async function diagnose(procs: readonly RedisServer[], masterName: string, dir: string): Promise<string> {
  const out = [`=== sentinel setup '${masterName}' (${dir}) at ${new Date().toISOString()} ===`];
  const show = (r: Reply): string =>
    Array.isArray(r) ? `[${r.map(show).join(", ")}]` : r instanceof Error ? `(error) ${r.message}` : String(r);
  const ask = async (port: number, args: Arg[]): Promise<Reply | Error> => {
    try {
      return await command(port, args, { timeoutMs: 1500 });
    } catch (e) {
      return e as Error;
    }
  };
  await Promise.all(procs.map(async (p) => {
    const lines = [`--- ${p.kind} 127.0.0.1:${p.port} (pid ${p.pid}${p.exited ? ", exited" : ""}) ---`];
    if (!p.exited) {
      lines.push(`ROLE: ${show(await ask(p.port, ["ROLE"]))}`);
      if (p.kind === "sentinel") {
        lines.push(`SENTINEL MYID: ${show(await ask(p.port, ["SENTINEL", "MYID"]))}`);
        const m = await ask(p.port, ["SENTINEL", "MASTER", masterName]);
        lines.push(`SENTINEL MASTER: ${m instanceof Error ? m.message : JSON.stringify(pairs(m))}`);
        const rs = await ask(p.port, ["SENTINEL", "REPLICAS", masterName]);
        const brief = (r: Record<string, string>) =>
          `${r.name} flags=${r.flags} master=${r["master-host"]}:${r["master-port"]} link=${r["master-link-status"]}`;
        lines.push(
          `SENTINEL REPLICAS: ${rs instanceof Error ? rs.message : (rs as Reply[]).map(pairs).map(brief).join("; ")}`,
        );
      } else {
        const r = await ask(p.port, ["INFO", "replication"]);
        lines.push(`INFO replication: ${r instanceof Error ? r.message : String(r).trim().split(/\r?\n/).join(" | ")}`);
      }
      const cl = await ask(p.port, ["CLIENT", "LIST"]);
      if (cl instanceof Error) lines.push(`CLIENT LIST: ${cl.message}`);
      else {
        const clients = String(cl).trim().split("\n").filter(Boolean);
        lines.push(`CLIENT LIST: ${clients.length} clients`);
        for (const c of clients) {
          const f = Object.fromEntries(
            c.split(" ").map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
          );
          lines.push(`  ${f.addr} name=${f.name || "-"} age=${f.age} flags=${f.flags} cmd=${f.cmd}`);
        }
      }
    }
    lines.push("log (tail):", p.log().slice(-8000).trimEnd());
    return lines.join("\n");
  })).then((sections) => out.push(...sections));
  return out.join("\n");
}
