// Child processes of the benchmark: spawned with `process.execPath --import tsx`, tracked so that every one of
// them is killed (by pid) on exit, error or signal.
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";

const live = new Set<ChildProcess>();

/** SIGKILL every child still running (synchronous, for exit handlers). */
export function killAllChildren(): void {
  for (const p of live) {
    if (p.exitCode === null && p.signalCode === null && p.pid !== undefined) {
      try {
        process.kill(p.pid, "SIGKILL");
      } catch { /* gone */ }
    }
  }
}

function track(p: ChildProcess, label: string): Promise<number | null> {
  live.add(p);
  const exited = new Promise<number | null>((resolve) =>
    p.once("exit", (code) => {
      live.delete(p);
      resolve(code);
    })
  );
  p.stderr?.setEncoding("utf8");
  createInterface({ input: p.stderr! }).on("line", (l) => {
    if (l.trim()) console.error(`  [${label}] ${l}`);
  });
  return exited;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([
    p,
    new Promise<never>((_, rej) => timer = setTimeout(() => rej(new Error(`timed out after ${ms} ms: ${what}`)), ms)),
  ]).finally(() => clearTimeout(timer));
}

/** A long-lived worker speaking the line protocol of bench/_worker.ts. */
export class Worker {
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;
  /** Wall-clock correction: this worker's (wall − monotonic) minus the parent's, ms. */
  offset = 0;
  #stopping = false;
  #pending: { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void }[] = [];

  constructor(file: string, args: string[], readonly label: string, cwd: string) {
    // BENCH_WORKER_NODE_ARGS (space-separated), e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof": to profile the workers.
    const extra = process.env.BENCH_WORKER_NODE_ARGS?.split(" ").filter(Boolean) ?? [];
    this.proc = spawn(process.execPath, [...extra, "--import", "tsx", file, ...args], {
      cwd,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.exited = track(this.proc, label);
    createInterface({ input: this.proc.stdout! }).on("line", (line) => {
      if (line.startsWith("@@ ")) {
        const reply = JSON.parse(line.slice(3));
        const p = this.#pending.shift();
        if (!p && this.#stopping) return;
        if (!p) return console.error(`  [${label}] unexpected reply ${line.slice(0, 200)}`);
        if (reply.ok) p.resolve(reply);
        else p.reject(new Error(`${label}: ${reply.error}`));
      } else if (line.trim()) console.error(`  [${label}] ${line}`);
    });
    void this.exited.then((code) => {
      for (const p of this.#pending.splice(0)) p.reject(new Error(`${label} exited with code ${code}`));
    });
  }

  // deno-lint-ignore no-explicit-any
  request(req: Record<string, unknown>, timeoutMs: number): Promise<any> {
    const reply = new Promise<Record<string, unknown>>((resolve, reject) => this.#pending.push({ resolve, reject }));
    this.proc.stdin!.write(JSON.stringify(req) + "\n");
    return withTimeout(reply, timeoutMs, `${this.label} ${String(req.op)}`);
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.#stopping = true;
    try {
      this.proc.stdin!.end(JSON.stringify({ op: "exit" }) + "\n");
      await withTimeout(this.exited, 3_000, `${this.label} exit`);
    } catch {
      this.proc.kill("SIGKILL");
      await this.exited;
    }
  }
}

/** Run a one-shot child that prints one `@@ <json>` line; returns that object. */
export async function runOnce(
  file: string,
  args: string[],
  label: string,
  cwd: string,
  timeoutMs: number,
): Promise<Record<string, unknown>> {
  const p = spawn(process.execPath, ["--import", "tsx", file, ...args], { cwd, stdio: ["ignore", "pipe", "pipe"] });
  const exited = track(p, label);
  const closed = new Promise<void>((r) => p.once("close", () => r()));
  let result: Record<string, unknown> | undefined;
  createInterface({ input: p.stdout! }).on("line", (line) => {
    if (line.startsWith("@@ ")) result = JSON.parse(line.slice(3));
    else if (line.trim()) console.error(`  [${label}] ${line}`);
  });
  try {
    const code = await withTimeout(exited, timeoutMs, label);
    await withTimeout(closed, 2_000, `${label} stdio`).catch(() => {});
    if (!result) throw new Error(`${label} exited with code ${code} and no result`);
    return result;
  } finally {
    if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
  }
}

export { withTimeout };
