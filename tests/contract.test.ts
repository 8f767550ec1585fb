// The behavioural contract, run once per client adapter that this runtime supports: node-redis v4 and v5,
// ioredis, Bun's RedisClient (on Bun only) and HTTP (Upstash REST protocol, through harness/http_bridge.ts).
// On Node, ioredis also runs against a real Cluster and a Sentinel group.
import { adapters, contract, ioredisTopologies } from "./_contract.ts";
import { runtimeName } from "./_redis.ts";

for (const adapter of adapters) contract(adapter);
if (runtimeName() === "node") ioredisTopologies();
