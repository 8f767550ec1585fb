// Harness: independent plain redis-servers (no replication between them), as Redlock and the multi-master
// measurements use them. Each is a harness/redis.ts startRedis() server: its own free loopback port, verified
// to answer with its own pid, stopped by pid.
//
//   const ms = await startMasters(5);
//   const clients = await Promise.all(ms.map((m) => m.client()));
//   await ms.stopAll();
import { type RedisServer, startRedis } from "./redis.ts";

export type Masters = RedisServer[] & { stopAll(): Promise<void> };

/** n independent redis-servers with the default arguments plus `extra`; stopAll() stops them all. */
export async function startMasters(n: number, extra: string[] = []): Promise<Masters> {
  const servers: RedisServer[] = [];
  const stopAll = async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop().catch(() => {})));
  };
  try {
    for (let i = 0; i < n; i++) servers.push(await startRedis(extra, { label: "masters" }));
  } catch (e) {
    await stopAll();
    throw e;
  }
  return Object.assign([...servers], { stopAll }) as Masters;
}
