// The Redis the demo runs against: $REDIS_URL when given, else a throwaway redis-server on a free loopback
// port that is stopped (and its directory removed) afterwards. Never the machine's 6379.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { createClient } from "redis";
import { freePort, sleep } from "../../tests/_redis.ts";

/** A failure the demo reports as one line (no stack trace). */
export class DemoError extends Error {}

export const INSTALL_HINT = "the demo needs redis-server (Redis 7 or later) on PATH: install it with " +
  "'apt-get install redis-server' (Debian/Ubuntu) or 'brew install redis' (macOS), or set REDIS_URL=redis://…";

export interface DemoRedis {
  readonly url: string;
  /** Whether the demo started this server itself (and so may do anything with it). */
  readonly own: boolean;
  readonly port?: number;
  stop(): Promise<void>;
}


/** Whether `redis-server` can be started at all. */
function hasRedisServer(): Promise<boolean> {
  return new Promise((resolve) => {
    try {
      const p = spawn("redis-server", ["--version"], { stdio: "ignore" });
      p.on("error", () => resolve(false));
      p.on("exit", (code) => resolve(code === 0));
    } catch {
      resolve(false);
    }
  });
}

async function ping(url: string): Promise<boolean> {
  const c = createClient({ url, socket: { reconnectStrategy: false, connectTimeout: 1_000 } });
  c.on("error", () => {});
  try {
    await c.connect();
    await c.ping();
    return true;
  } catch {
    return false;
  } finally {
    await c.disconnect().catch(() => {});
  }
}

export async function demoRedis(): Promise<DemoRedis> {
  const given = process.env.REDIS_URL;
  if (given) {
    if (!await ping(given)) {
      throw new DemoError(`cannot reach Redis at REDIS_URL=${given.replace(/:[^:@/]*@/, ":***@")}`);
    }
    return { url: given, own: false, stop: async () => {} };
  }
  if (!await hasRedisServer()) throw new DemoError(INSTALL_HINT);
  const dir = mkdtempSync(join(tmpdir(), "redlease-demo-"));
  for (let attempt = 0; attempt < 4; attempt++) {
    const port = await freePort();
    const proc = spawn("redis-server", [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
    ], { stdio: ["ignore", "ignore", "ignore"] });
    let exited = false;
    const gone = new Promise<void>((r) =>
      proc.once("exit", () => {
        exited = true;
        r();
      })
    );
    proc.on("error", () => {});
    const url = `redis://127.0.0.1:${port}`;
    for (let i = 0; i < 100 && !exited; i++) {
      if (await ping(url)) {
        return {
          url,
          own: true,
          port,
          async stop() {
            if (!exited) {
              proc.kill("SIGKILL");
              await gone;
            }
            rmSync(dir, { recursive: true, force: true });
          },
        };
      }
      await sleep(50);
    }
    if (!exited) proc.kill("SIGKILL");
    await gone;
  }
  rmSync(dir, { recursive: true, force: true });
  throw new DemoError("redis-server did not start (tried 4 free ports)");
}
