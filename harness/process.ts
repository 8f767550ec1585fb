// Child processes for the harness's users: the command line that runs a TypeScript file on the runtime running the
// caller (Node with tsx, Bun or Deno), and running a command to completion with its output. The tests spawn fixtures
// with it and scripts/check_readme.ts runs the blocks of README.md and docs/ with it.
import { spawn } from "node:child_process";

/** The command line that runs a TypeScript file on the runtime running the caller. */
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
