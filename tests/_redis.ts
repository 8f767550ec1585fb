// Test harness: throwaway redis-server processes on free loopback ports, stopped by pid (never 6379), and helpers
// for running child processes and checking results. The servers come from tests/_servers/redis.ts, the one module
// that starts redis-servers (for the topologies, the benchmarks, the chaos runs and the demo too); this file
// re-exports what the tests use.
import { spawn } from "node:child_process";
import type { Driver } from "../src/driver.ts";

export { type Client, freePort, type RedisServer, sleep, startRedis } from "./_servers/redis.ts";
export { until } from "./_servers/wait.ts";

/** The command line that runs a TypeScript file on the runtime running this test. */
export function runtimeArgs(file: string): [string, string[]] {
  const g = globalThis as { Deno?: { execPath(): string }; Bun?: unknown };
  if (g.Deno) return [g.Deno.execPath(), ["run", "-A", file]];
  if (g.Bun) return [process.execPath, [file]];
  return [process.execPath, ["--import", "tsx", file]];
}

export function runtimeName(): string {
  const g = globalThis as { Deno?: unknown; Bun?: unknown };
  return g.Deno ? "deno" : g.Bun ? "bun" : "node";
}

/** What a finished child process left behind. */
export interface Ran {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Whether it was SIGKILLed for running past its time limit. */
  readonly killed: boolean;
  readonly ms: number;
}

/** Run a command to completion (SIGKILL after `timeoutMs`), collecting its output. */
export function runProcess(
  cmd: string,
  args: string[],
  opts: { cwd: string; timeoutMs: number; env?: Record<string, string | undefined> },
): Promise<Ran> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const env = opts.env && Object.fromEntries(Object.entries(opts.env).filter(([, v]) => v !== undefined)) as Record<
      string,
      string
    >;
    const child = spawn(cmd, args, { cwd: opts.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let killed = false;
    child.stdout!.on("data", (d) => (stdout += d));
    child.stderr!.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      killed = true;
      child.kill("SIGKILL");
    }, opts.timeoutMs);
    child.on("error", (err) => (stderr += String(err)));
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, killed, ms: performance.now() - t0 });
    });
  });
}

/** The owners of an inspect() result as `{ owner, holds }` (without each hold's kind and remaining time). */
export function holdsOf(info: { readonly owners: ReadonlyArray<{ readonly owner: string; readonly holds: number }> }) {
  return info.owners.map(({ owner, holds }) => ({ owner, holds }));
}

/** The reason `signal` aborts with, or "timeout" if it does not within `ms`. */
export function abortedWithin(signal: AbortSignal, ms: number): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve("timeout"), ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve(signal.reason);
    }, { once: true });
  });
}

/**
 * A client (a Driver) that sends nothing: every command fails the call with "no command may be sent" and is
 * counted in `sent`. An argument refused while `sent` stays 0 was refused before any Redis command.
 *
 * @example
 * ```ts
 * const idle = noCommands();
 * await assert.rejects(acquire(idle, ""), RangeError);
 * assert.equal(idle.sent, 0);
 * ```
 */
export function noCommands(): Driver & { sent: number } {
  const refuse = () => {
    d.sent++;
    return Promise.reject(new Error("no command may be sent"));
  };
  const d = { sent: 0, evalScript: refuse, evalSource: refuse, loadScript: refuse, command: refuse };
  return d;
}
