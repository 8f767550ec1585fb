// The chaos runs' redis-servers: harness/redis.ts's startRedis (free loopback port, never 6379, stopped by
// pid, restart() on the same port for the "Redis restarted under load" fault), with clients that reconnect quickly
// (20 ms more per retry, at most 200 ms) because the faults drop connections on purpose.
import { type Client, type RedisServer, startRedis } from "../harness/redis.ts";

export type { Client };
export type ChaosRedis = RedisServer;

const reconnectStrategy = (n: number) => Math.min(n * 20, 200);

/** A redis-server with the default arguments plus `args`, whose client() reconnects quickly. */
export function startChaosRedis(args: readonly string[] = []): Promise<ChaosRedis> {
  return startRedis(args, { label: "chaos", client: { socket: { reconnectStrategy } } });
}
