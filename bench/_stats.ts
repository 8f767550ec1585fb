// Statistics and INFO parsing shared by the benchmark (percentiles and commandstats handling adapted from
// bench/measure.ts).
import { readFileSync } from "node:fs";

/** Nearest-rank percentile of an ascending array. */
export function pct(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function sortedF64(xs: ArrayLike<number>): Float64Array {
  return Float64Array.from(xs).sort();
}

/** Median of the finite values (NaN when there are none). */
export function median(xs: readonly number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export const r1 = (x: number) => Math.round(x * 10) / 10;
export const r2 = (x: number) => Math.round(x * 100) / 100;
export const r3 = (x: number) => Math.round(x * 1000) / 1000;

// ---------------------------------------------------------------------------------------------------------------
// INFO commandstats / INFO cpu

/** Per command: calls and total µs spent (Redis 7.0 counts commands called from Lua as well). */
export type CommandStats = Record<string, { calls: number; usec: number }>;

/** Commands the benchmark's own admin connection issues; never counted. */
const ADMIN = /^(info|config(\|.*)?)$/;

export function parseCommandStats(info: string): CommandStats {
  const out: CommandStats = {};
  for (const line of info.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line);
    if (m && !ADMIN.test(m[1])) out[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  }
  return out;
}

/** used_cpu_user + used_cpu_sys of the redis-server process, in µs. */
export function parseCpuMicros(info: string): number {
  const user = /used_cpu_user:([\d.]+)/.exec(info)?.[1];
  const sys = /used_cpu_sys:([\d.]+)/.exec(info)?.[1];
  return Math.round((Number(user ?? NaN) + Number(sys ?? NaN)) * 1e6);
}

/**
 * CPU time the whole machine spent busy so far (all cores, every process; /proc/stat's user, nice, system, irq,
 * softirq and steal), in µs, at the kernel's 10 ms resolution; NaN where /proc/stat is missing (not Linux). A window's
 * delta minus what the benchmark's own processes used there is what the rest of the machine took from it.
 */
export function machineBusyUs(): number {
  try {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = f;
    return (user + nice + system + irq + softirq + (steal ?? 0)) * 10_000;
  } catch {
    return NaN;
  }
}

export interface CommandCounts {
  /** Commands this library's clients send directly, per operation. */
  clientPerOp: number;
  /** All commands per operation, including those its Lua scripts call. */
  totalPerOp: number;
  /** total − client: commands called from Lua, per operation. */
  luaPerOp: number;
  /** Per command: calls per operation, and whether it is client-issued for this library. */
  perOp: Record<string, { calls: number; client: boolean; usecPerOp: number }>;
  /** Redis-side µs per operation accumulated by the client-issued commands (EVALSHA includes its script). */
  clientUsecPerOp: number;
}

/**
 * Split commandstats into client-issued and Lua-internal commands. `clientCommands` are the commands the library
 * sends itself (taken from its source); its scripts never call any of them, so total − client is what Lua called.
 */
export function perOp(stats: CommandStats, ops: number, clientCommands: RegExp): CommandCounts {
  let client = 0, total = 0, clientUsec = 0;
  const per: CommandCounts["perOp"] = {};
  for (const [cmd, s] of Object.entries(stats).sort((a, b) => b[1].calls - a[1].calls)) {
    const isClient = clientCommands.test(cmd);
    per[cmd] = { calls: r3(s.calls / ops), client: isClient, usecPerOp: r3(s.usec / ops) };
    total += s.calls;
    if (isClient) {
      client += s.calls;
      clientUsec += s.usec;
    }
  }
  return {
    clientPerOp: r3(client / ops),
    totalPerOp: r3(total / ops),
    luaPerOp: r3((total - client) / ops),
    perOp: per,
    clientUsecPerOp: r2(clientUsec / ops),
  };
}

/** "evalsha 2, subscribe 0.5 | Lua: hlen 1, …" */
export function describeCounts(c: CommandCounts): string {
  const list = (client: boolean) =>
    Object.entries(c.perOp).filter(([, v]) => v.client === client).map(([k, v]) => `${k} ${v.calls}`).join(", ") ||
    "none";
  return `client: ${list(true)} | Lua: ${list(false)}`;
}

/**
 * This process's wall clock (performance.timeOrigin + performance.now()) minus the system-wide monotonic clock
 * (process.hrtime, CLOCK_MONOTONIC), in ms. Constant for a process; the best of many samples, so that a preemption
 * between the two readings does not skew it. The difference between two processes' values is how far apart their
 * wall timestamps are.
 */
export function clockSkewMs(): number {
  let best = Infinity, skew = 0;
  for (let i = 0; i < 200; i++) {
    const a = process.hrtime.bigint();
    const w = performance.timeOrigin + performance.now();
    const b = process.hrtime.bigint();
    const d = Number(b - a);
    if (d < best) {
      best = d;
      skew = w - Number(a + b) / 2e6;
    }
  }
  return skew;
}
