// The leader-election scene: several scheduler processes (scheduler.ts) campaign for one election; the leader runs
// the job of every time slot and commits it fenced by its term. The demo pauses the leader (SIGSTOP) for longer than
// its lease, then resumes it, and later kills a leader (SIGKILL), and reads back what ran.
import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { createClient } from "redis";
import { observe } from "../../mod.ts";

const SCHEDULER = join(dirname(fileURLToPath(import.meta.url)), "scheduler.ts");
/** How long a job's work takes before its commit, ms. */
export const WORK_MS = 40;

export function schedulerKeys(ns: string) {
  return {
    election: `${ns}:scheduler`,
    maxTerm: `${ns}:scheduler:max-term`,
    jobs: `${ns}:scheduler:jobs`,
    refused: `${ns}:scheduler:refused`,
  };
}

/**
 * The fenced commit of a slot's job. KEYS: highest term seen, jobs (slot -> "<term>:<ms>"), refused count. ARGV:
 * term, slot, now ms. A term below the highest seen is a deposed leader's: refused (counted). A slot committed
 * already is not run again.
 */
export const COMMIT = `
local max = tonumber(redis.call('GET', KEYS[1]) or '0')
local term = tonumber(ARGV[1])
if term < max then redis.call('INCR', KEYS[3]) return 0 end
if term > max then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[1] .. ':' .. ARGV[3])`;

export interface SchedulerConfig {
  readonly processes: number;
  /** The leadership's watchdog lease, ms. */
  readonly leaseMs: number;
  /** One job per slot of this many ms. */
  readonly slotMs: number;
  readonly seconds: number;
}

export interface SchedulerResult {
  /** Leaders elected (terms that committed at least one job). */
  readonly terms: number;
  readonly jobs: number;
  /** Slots with no job between the first and the last committed one. */
  readonly missedSlots: number;
  /** Commits refused because their term was no longer the highest: a leader that was paused past its lease. */
  readonly refused: number;
  /**
   * Commits accepted from a term lower than one that had committed before (a deposed leader's job run after its
   * successor's): must be 0.
   */
  readonly staleAccepted: number;
  /** From the SIGKILL of a leader to the next term's first commit, ms. */
  readonly handoverMs: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function runScheduler(
  url: string,
  ns: string,
  c: SchedulerConfig,
  kids: { add(p: ChildProcess): unknown },
): Promise<SchedulerResult> {
  const keys = schedulerKeys(ns);
  const admin = createClient({ url });
  admin.on("error", () => {});
  await admin.connect();
  const procs = Array.from({ length: c.processes }, () => {
    const p = spawn(process.execPath, ["--import", "tsx", SCHEDULER, url, ns, String(c.leaseMs), String(c.slotMs)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    kids.add(p);
    const lines = createInterface({ input: p.stdout! });
    const ready = new Promise<void>((resolve) => lines.on("line", (l) => l === "READY" && resolve()));
    /** Resolves when this process next starts a job's work. */
    const working = () =>
      new Promise<void>((resolve) => {
        const on = (l: string) => {
          if (l !== "WORK") return;
          lines.off("line", on);
          resolve();
        };
        lines.on("line", on);
      });
    return { p, ready, working };
  });
  await Promise.all(procs.map((x) => x.ready));
  // Follow the election: the leader proclaims its pid.
  const stop = new AbortController();
  let leaderPid = 0;
  const watching = (async () => {
    for await (const s of observe(admin, keys.election, { signal: stop.signal, prefix: ns })) {
      leaderPid = Number(s.value ?? 0);
    }
  })();
  const t0 = Date.now();
  const until = async (ms: number) => await sleep(Math.max(0, t0 + ms - Date.now()));
  const leader = async () => {
    while (!procs.some((x) => x.p.pid === leaderPid)) await sleep(10);
    return procs.find((x) => x.p.pid === leaderPid)!;
  };
  const third = (c.seconds * 1000) / 3;
  await until(third);
  // A leader paused in a job's work for three leases: it is deposed, and the commit it makes when it resumes carries
  // its old term.
  const paused = await leader();
  await paused.working();
  paused.p.kill("SIGSTOP");
  await sleep(3 * c.leaseMs);
  paused.p.kill("SIGCONT");
  await until(2 * third);
  const killed = await leader();
  const killedAt = Date.now();
  killed.p.kill("SIGKILL");
  await until(3 * third);
  for (const x of procs) x.p.kill("SIGKILL");
  stop.abort();
  await watching;
  const jobs = Object.entries(await admin.hGetAll(keys.jobs)).map(([slot, v]) => {
    const [term, at] = v.split(":").map(Number);
    return { slot: Number(slot), term, at };
  }).sort((a, b) => a.slot - b.slot);
  const refused = Number(await admin.get(keys.refused) ?? 0);
  await admin.del([keys.maxTerm, keys.jobs, keys.refused]);
  await admin.quit();
  const terms = new Set(jobs.map((j) => j.term));
  const first = jobs[0]?.slot ?? 0, last = jobs.at(-1)?.slot ?? 0;
  const killedTerm = jobs.filter((j) => j.at <= killedAt).at(-1)?.term;
  const after = jobs.find((j) => j.at > killedAt && j.term !== killedTerm);
  let staleAccepted = 0, highest = 0;
  for (const j of [...jobs].sort((a, b) => a.at - b.at)) {
    if (j.term < highest) staleAccepted++;
    highest = Math.max(highest, j.term);
  }
  return {
    terms: terms.size,
    jobs: jobs.length,
    missedSlots: last - first + 1 - jobs.length,
    refused,
    staleAccepted,
    handoverMs: after ? after.at - killedAt : NaN,
  };
}
