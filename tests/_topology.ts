// Test harness entry for topologies: Redis Cluster, Redis Sentinel and independent masters on free loopback ports,
// every process started by tests/_servers/redis.ts and stopped by pid (never port 6379). The code lives in
// tests/_servers/ (cleanup.ts, resp.ts, redis.ts, cluster.ts, sentinel.ts, masters.ts); this file only re-exports
// what the tests use, so they keep importing "./_topology.ts".
//
//   const c = await startCluster();                 // 3 masters + 3 replicas
//   const s = await startSentinel();                // master + 1 replica + 3 sentinels
//   const ms = await startMasters(3);               // independent masters
export { crc16, slotOf } from "../src/adapters/_slot.ts";
export { freePort, pause, resume } from "./_servers/redis.ts";
export { command, parseInfo, type Reply, RespError } from "./_servers/resp.ts";
export { pollFor, sleep } from "./_servers/wait.ts";
export {
  type ClusterClient,
  type ClusterNode,
  type ClusterStartOptions,
  type MigrateOptions,
  startCluster,
  type StartedCluster,
} from "./_servers/cluster.ts";
export {
  type ProcInfo,
  type SentinelClient,
  type SentinelStartOptions,
  type StartedSentinel,
  startSentinel,
} from "./_servers/sentinel.ts";
export { type Masters, startMasters } from "./_servers/masters.ts";
