// A throwaway redis-server on a free loopback port (the port from tests/_redis.ts's freePort), stopped by pid, with
// the version and a synchronous kill the benchmark needs. Never touches 6379.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "redis";
import { freePort, sleep } from "../tests/_redis.ts";

export type NodeRedisClient = ReturnType<typeof createClient>;

export { sleep };


export interface Server {
  readonly port: number;
  readonly url: string;
  readonly pid: number;
  readonly version: string;
  /** Kill it now (synchronous; for exit handlers). */
  killSync(): void;
  stop(): Promise<void>;
}

export async function startRedis(): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), "redlease-bench-"));
  for (let attempt = 0;; attempt++) {
    let port = await freePort();
    if (port === 6379) port = await freePort();
    if (port === 6379) throw new Error("refusing to use port 6379");
    const proc: ChildProcess = spawn("redis-server", [
      "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
    ], { stdio: ["ignore", "ignore", "ignore"] });
    let exited = false;
    const gone = new Promise<void>((r) => proc.once("exit", () => r()));
    void gone.then(() => (exited = true));
    const url = `redis://127.0.0.1:${port}`;
    const probe = createClient({ url, socket: { reconnectStrategy: false } });
    probe.on("error", () => {});
    let version = "";
    for (let i = 0; i < 100 && !exited && !version; i++) {
      try {
        await probe.connect();
        version = /redis_version:(\S+)/.exec(String(await probe.sendCommand(["INFO", "server"])))?.[1] ?? "?";
      } catch {
        await sleep(50);
      }
    }
    await probe.disconnect().catch(() => {});
    const killSync = () => {
      if (!exited) {
        try {
          process.kill(proc.pid!, "SIGKILL");
        } catch { /* already gone */ }
      }
    };
    if (!version) {
      killSync();
      if (attempt < 3) continue;
      throw new Error(`redis-server did not start on port ${port}`);
    }
    return {
      port,
      url,
      pid: proc.pid!,
      version,
      killSync,
      async stop() {
        killSync();
        await gone;
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
}
