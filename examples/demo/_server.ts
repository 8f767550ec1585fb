// The Redis the demo runs against: $REDIS_URL when given, else a throwaway redis-server from harness/redis.ts
// (the one module that starts redis-servers: a free loopback port, never the machine's 6379) that is stopped by pid,
// its directory removed, afterwards.
import process from "node:process";
import { createClient } from "redis";
import { hasRedisServer, startRedis } from "../../harness/redis.ts";

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
  const server = await startRedis([], { label: "demo" }).catch((e: Error) => {
    throw new DemoError(`redis-server did not start: ${e.message.split("\n")[0]}`);
  });
  return { url: server.url, own: true, port: server.port, stop: () => server.stop() };
}
