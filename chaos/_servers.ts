// Throwaway redis-server processes for the chaos runs: like tests/_redis.ts, but a server can be restarted on
// the same port (the "Redis restarted under load" fault) and is always stopped by its own pid. Never 6379.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "redis";
import { freePort, sleep } from "../tests/_redis.ts";

export type Client = ReturnType<typeof createClient>;

export class RedisProc {
  readonly url: string;
  #proc: ChildProcess | undefined;
  #exited: Promise<void> | undefined;
  readonly #dir: string;
  readonly #clients: Client[] = [];

  private constructor(readonly port: number, readonly args: readonly string[]) {
    this.url = `redis://127.0.0.1:${port}`;
    this.#dir = mkdtempSync(join(tmpdir(), "redlease-chaos-"));
  }

  /** Start a redis-server on a free loopback port (retrying another port if it fails to come up). */
  static async start(args: readonly string[] = []): Promise<RedisProc> {
    let last: unknown;
    for (let attempt = 0; attempt < 4; attempt++) {
      const srv = new RedisProc(await freePort(), args);
      try {
        await srv.#spawn();
        return srv;
      } catch (e) {
        last = e;
        await srv.stop();
      }
    }
    throw last;
  }

  get pid(): number | undefined {
    return this.#proc?.pid;
  }

  async #spawn(): Promise<void> {
    const proc = spawn("redis-server", [
      "--port",
      String(this.port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      this.#dir,
      ...this.args,
    ], { stdio: ["ignore", "ignore", "ignore"] });
    this.#proc = proc;
    let exited = false;
    this.#exited = new Promise((r) =>
      proc.once("exit", () => {
        exited = true;
        r();
      })
    );
    const probe = createClient({ url: this.url, socket: { reconnectStrategy: false } });
    probe.on("error", () => {});
    for (let i = 0; i < 200 && !exited; i++) {
      try {
        await probe.connect();
        await probe.ping();
        await probe.disconnect().catch(() => {});
        return;
      } catch {
        await sleep(25);
      }
    }
    await probe.disconnect().catch(() => {});
    throw new Error(`redis-server did not start on port ${this.port}`);
  }

  /** SIGKILL the server (all data is lost: no persistence) and start a fresh one on the same port. */
  async restart(downMs = 0): Promise<void> {
    await this.#kill();
    if (downMs > 0) await sleep(downMs);
    await this.#spawn();
  }

  async #kill(): Promise<void> {
    const proc = this.#proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    process.kill(proc.pid!, "SIGKILL");
    await this.#exited;
  }

  /** A new connected client that ignores connection errors (they are expected under faults); closed by stop(). */
  async client(): Promise<Client> {
    const c = createClient({ url: this.url, socket: { reconnectStrategy: (n: number) => Math.min(n * 20, 200) } });
    c.on("error", () => {});
    await c.connect();
    this.#clients.push(c);
    return c;
  }

  async stop(): Promise<void> {
    for (const c of this.#clients) await c.disconnect().catch(() => {});
    this.#clients.length = 0;
    await this.#kill();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
