// Harness entry for topologies: Redis Cluster, Redis Sentinel and independent masters on free loopback ports,
// every process started by redis.ts and stopped by pid (never port 6379). The code lives in cleanup.ts, resp.ts,
// redis.ts, cluster.ts, sentinel.ts and masters.ts; this file re-exports what the tests and measurements use.
//
//   const c = await startCluster();                 // 3 masters + 3 replicas
//   const s = await startSentinel();                // master + 1 replica + 3 sentinels
//   const ms = await startMasters(3);               // independent masters
export { crc16, slotOf } from "../src/adapters/_slot.ts";
export { freePort, pause, resume } from "./redis.ts";
export { command, parseInfo, type Reply, RespError } from "./resp.ts";
export { pollFor, sleep } from "./wait.ts";
export {
  type ClusterClient,
  type ClusterNode,
  type ClusterStartOptions,
  type MigrateOptions,
  startCluster,
  type StartedCluster,
} from "./cluster.ts";
export {
  type ProcInfo,
  type SentinelClient,
  type SentinelStartOptions,
  type StartedSentinel,
  startSentinel,
} from "./sentinel.ts";
export { type Masters, startMasters } from "./masters.ts";
