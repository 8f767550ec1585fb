// The app-server processes of the demo's flash sales (buyer.ts on Redis, pg_buyer.ts on PostgreSQL): started once,
// each prints READY when connected; then told `RUN <mode>` together, each prints lines of its own and one
// `RESULT <json>` when done; `EXIT` ends them. A failure is reported by the process as one `app server N: …` line.
import { type ChildProcess, spawn } from "node:child_process";
import process from "node:process";
import { createInterface } from "node:readline";
import { DemoError } from "./_server.ts";

/** The command line that runs a TypeScript file on the runtime running this script. */
export function runtimeArgs(file: string): [string, string[]] {
  const g = globalThis as { Deno?: { execPath(): string }; Bun?: unknown };
  if (g.Deno) return [g.Deno.execPath(), ["run", "-A", file]];
  if (g.Bun) return [process.execPath, [file]];
  return [process.execPath, ["--import", "tsx", file]];
}

/** `count` app servers running `file` with `args(i)`; tracked in `kids` (killed on an interrupt) while they run. */
export class AppServers<R> {
  readonly #procs: ChildProcess[] = [];
  readonly #ready: Promise<void>[] = [];
  readonly #exited: Promise<void>[] = [];
  #onLine: (i: number, line: string) => void = () => {};

  constructor(file: string, args: (i: number) => string[], readonly count: number, kids: Set<ChildProcess>) {
    const [cmd, pre] = runtimeArgs(file);
    for (let i = 0; i < count; i++) {
      const p = spawn(cmd, [...pre, ...args(i)], { stdio: ["pipe", "pipe", "pipe"] });
      kids.add(p);
      this.#procs.push(p);
      let stderr = "";
      p.stderr!.on("data", (d) => (stderr += d));
      let ready!: () => void;
      this.#ready.push(new Promise<void>((r) => (ready = r)));
      createInterface({ input: p.stdout! }).on("line", (line) => (line === "READY" ? ready() : this.#onLine(i, line)));
      this.#exited.push(
        new Promise<void>((resolve, reject) => {
          p.on("error", reject);
          p.on("exit", (code) => {
            kids.delete(p);
            if (code === 0) resolve();
            else {
              const lines = stderr.trim().split("\n");
              const last = lines.filter((l) => l.startsWith("app server")).pop();
              reject(new DemoError(last ?? `app server ${i} exited with code ${code}: ${lines[0]}`));
            }
          });
        }),
      );
    }
  }

  /** Resolves when every app server is connected; rejects if one dies first. */
  ready(): Promise<unknown> {
    return Promise.race([Promise.all(this.#ready), Promise.all(this.#exited)]);
  }

  /**
   * Run `mode` on every app server at once; resolves with their results and the wall time (s). `onLine` sees every
   * other line an app server prints, and each RESULT line with its parsed result.
   */
  async run(mode: string, onLine: (i: number, line: string, result?: R) => void = () => {}): Promise<[R[], number]> {
    const results: R[] = [];
    let done!: () => void;
    const all = new Promise<void>((r) => (done = r));
    this.#onLine = (i, line) => {
      if (!line.startsWith("RESULT ")) return onLine(i, line);
      results[i] = JSON.parse(line.slice(7));
      onLine(i, line, results[i]);
      if (results.filter(Boolean).length === this.count) done();
    };
    const t0 = performance.now();
    for (const p of this.#procs) p.stdin!.write(`RUN ${mode}\n`);
    // A crash mid-run rejects through #exited instead of leaving us waiting.
    await Promise.race([all, Promise.all(this.#exited)]);
    return [results, (performance.now() - t0) / 1_000];
  }

  /** Send `signal` to app server `i` (the PostgreSQL scene resumes a paused one with SIGCONT). */
  kill(i: number, signal: NodeJS.Signals): void {
    this.#procs[i].kill(signal);
  }

  /** Tell every app server to exit, and wait until they have. */
  async close(): Promise<void> {
    for (const p of this.#procs) p.stdin!.end("EXIT\n");
    await Promise.all(this.#exited);
  }

  /** SIGKILL those still running (after a failure). */
  killAll(): void {
    for (const p of this.#procs) if (p.exitCode === null) p.kill("SIGKILL");
  }
}
