// Harness: the one place that starts redis-server processes. Tests (tests/_redis.ts), the topologies
// (harness/cluster.ts, sentinel.ts, masters.ts), the benchmarks (bench/), the chaos runs (chaos/) and the
// demo (examples/demo/_server.ts) all start their servers here.
//
// A server runs on a free loopback port (never 6379; harness/cleanup.ts hands the ports out), in a temp dir of
// its own unless given one, and is ready once it answers INFO with its own pid (so a server somebody else started on
// "our" port is never mistaken for ours: the start retries on new ports instead). It is stopped by that pid
// (SIGKILL), never by name; servers still running when the process exits are SIGKILLed by an exit hook.
//
//   const s = await startRedis();                          // defaults: no persistence, bound to 127.0.0.1
//   const r = await startRedis(["--enable-debug-command", "yes"], { label: "chaos" });
//   const c = await s.client();                            // node-redis v4, disconnected by stop()
//   s.pause(); s.resume();                                 // SIGSTOP / SIGCONT
//   await s.restart(150);                                  // SIGKILL, 150 ms down, a fresh empty one on the same port
//   process.on("SIGINT", () => s.killSync());              // for exit handlers
//   await s.stop();                                        // clients closed, SIGKILL, temp dir removed
import { type ChildProcess, spawn } from "node:child_process";
import type { Buffer } from "node:buffer";
import process from "node:process";
import { createClient } from "redis";
import { freePort, releasePort, removeDir, reservePort, tempDir, track, tryKill, untrack } from "./cleanup.ts";
import { info } from "./resp.ts";
import { closeQuietly, sleep, withTimeout } from "./wait.ts";

export { freePort, sleep };

export type Client = ReturnType<typeof createClient>;
export type ClientOptions = NonNullable<Parameters<typeof createClient>[0]>;

/** Where a server runs, for building its command line. */
export interface ServerAt {
  readonly port: number;
  /** The cluster bus port (0 unless `bus`). */
  readonly busPort: number;
  readonly dir: string;
}

export interface StartOptions {
  /**
   * Arguments after the defaults (`--port P --bind 127.0.0.1 --save "" --appendonly no --dir D`); a function gets the
   * ports and dir.
   */
  args?: readonly string[] | ((at: ServerAt) => string[]);
  /** The whole command line instead of the defaults and `args` (a sentinel: its config file, then --sentinel). */
  argv?: (at: ServerAt) => string[];
  /** Also reserve a cluster bus port (ServerAt.busPort). */
  bus?: boolean;
  /** Run in this dir (the caller's: left in place) instead of a temp dir of its own that stop() removes. */
  dir?: string;
  /** The temp dir is named `redlease-<label>-XXXXXX` (default "test"). */
  label?: string;
  /** What error messages call it (default "redis-server"). */
  kind?: string;
  /** How long a start may take to answer INFO (default 20000 ms). */
  readyTimeoutMs?: number;
  /** Default options of client() (the url is always this server's). */
  client?: ClientOptions;
}

export interface RedisServer {
  readonly kind: string;
  readonly port: number;
  /** The cluster bus port, if `bus`. */
  readonly busPort: number | undefined;
  readonly url: string;
  /** The pid of the current process (a restart() changes it). */
  readonly pid: number;
  readonly dir: string;
  readonly argv: readonly string[];
  /** redis_version from INFO. */
  readonly version: string;
  /** Whether the current process has exited. */
  readonly exited: boolean;
  /** Resolves once the current process has exited. */
  readonly exit: Promise<void>;
  /** The last 16 KB of its output (stdout and stderr), across restarts. */
  log(): string;
  /** A new connected node-redis client (options merged over the `client` start option); closed by stop(). */
  client(options?: ClientOptions): Promise<Client>;
  /** SIGSTOP: it keeps its sockets open but answers nothing. */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
  /** SIGKILL and wait for the exit (up to 5 s). */
  kill(): Promise<void>;
  /** SIGKILL now, without waiting (synchronous: for exit and signal handlers). */
  killSync(): void;
  /** SIGKILL (all data is lost: no persistence), wait `downMs`, then start a fresh one on the same port(s). */
  restart(downMs?: number): Promise<void>;
  /** Close its clients, SIGKILL it, release its ports and remove its own temp dir. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 20_000;
const LOG_TAIL = 16_384;
const ATTEMPTS = 6;
const PORT_CLASH =
  /already in use|Could not create server TCP listening socket|Failed listening on port|Could not bind/i;

/** SIGSTOP a process by pid (e.g. a redis-server): it keeps its sockets open but answers nothing. */
export function pause(pid: number): void {
  process.kill(pid, "SIGSTOP");
}

/** SIGCONT a process stopped with pause(). */
export function resume(pid: number): void {
  process.kill(pid, "SIGCONT");
}

/** Whether `redis-server` can be run at all (is on PATH). */
export function hasRedisServer(): Promise<boolean> {
  return new Promise((resolve) => {
    try {
      const p = spawn("redis-server", ["--version"], { stdio: "ignore" });
      p.on("error", () => resolve(false));
      p.on("exit", (code) => resolve(code === 0));
    } catch {
      resolve(false);
    }
  });
}

/** A connected node-redis client to `url` (connection errors ignored); its close is pushed onto `closers`. */
export async function connectClient(url: string, closers: Array<() => Promise<unknown>>): Promise<Client> {
  const c = createClient({ url });
  c.on("error", () => {});
  await c.connect();
  closers.push(() => c.disconnect());
  return c;
}

/** A plain redis-server with the default arguments plus `extra`. */
export function startRedis(
  extra: readonly string[] = [],
  options: Omit<StartOptions, "args"> = {},
): Promise<RedisServer> {
  return startServer({ ...options, args: extra });
}

/**
 * Start a redis-server (or a sentinel) on fresh ports and wait until it answers INFO with its own pid. Retries on new
 * ports when the port turned out to be taken (by another process, or a server started concurrently); any other
 * failure to start throws with the server's output.
 */
export async function startServer(opts: StartOptions = {}): Promise<RedisServer> {
  const kind = opts.kind ?? "redis-server";
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? tempDir(opts.label ?? "test");
  let lastError = "";
  try {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const port = await reservePort();
      const busPort = opts.bus ? await reservePort() : undefined;
      const at: ServerAt = { port, busPort: busPort ?? 0, dir };
      const extra = typeof opts.args === "function" ? opts.args(at) : opts.args ?? [];
      const argv = opts.argv ? opts.argv(at) : [...defaultArgs(at), ...extra];
      const server = new Server(kind, port, busPort, dir, ownDir, argv, opts);
      const clash = await server.launch().catch((e) => {
        releasePort(port);
        releasePort(busPort);
        throw e;
      });
      if (clash === undefined) return server;
      releasePort(port);
      releasePort(busPort);
      lastError = clash;
    }
  } catch (e) {
    if (ownDir) removeDir(dir);
    throw e;
  }
  if (ownDir) removeDir(dir);
  throw new Error(`could not start ${kind} after ${ATTEMPTS} attempts; last error: ${lastError}`);
}

function defaultArgs({ port, dir }: ServerAt): string[] {
  return ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir];
}

class Server implements RedisServer {
  readonly url: string;
  #child: ChildProcess | undefined;
  #pid = -1;
  #exited = true;
  #exit: Promise<void> = Promise.resolve();
  #tail = "";
  #version = "";
  #stopped = false;
  readonly #clients: Client[] = [];
  readonly #ownDir: boolean;
  readonly #readyTimeoutMs: number;
  readonly #clientOptions: ClientOptions | undefined;

  constructor(
    readonly kind: string,
    readonly port: number,
    readonly busPort: number | undefined,
    readonly dir: string,
    ownDir: boolean,
    readonly argv: readonly string[],
    opts: StartOptions,
  ) {
    this.url = `redis://127.0.0.1:${port}`;
    this.#ownDir = ownDir;
    this.#readyTimeoutMs = opts.readyTimeoutMs ?? READY_TIMEOUT_MS;
    this.#clientOptions = opts.client;
  }

  get pid(): number {
    return this.#pid;
  }

  get exited(): boolean {
    return this.#exited;
  }

  get exit(): Promise<void> {
    return this.#exit;
  }

  get version(): string {
    return this.#version;
  }

  log(): string {
    return this.#tail;
  }

  /**
   * The single spawn site: start the process on this.port and wait until it answers INFO with its own pid. Resolves
   * undefined once ready, or the reason when the port turned out to be taken (the process is gone then); throws on
   * any other failure (the process is gone then too).
   */
  async launch(): Promise<string | undefined> {
    const child = spawn("redis-server", [...this.argv], { stdio: ["ignore", "pipe", "pipe"] });
    const onData = (d: Buffer) => {
      this.#tail += d.toString();
      if (this.#tail.length > LOG_TAIL) this.#tail = this.#tail.slice(-LOG_TAIL);
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    let spawnError: Error | undefined;
    child.on("error", (e) => (spawnError = e));
    if (child.pid === undefined) {
      await sleep(20);
      throw new Error(`could not spawn redis-server ${this.argv.join(" ")}: ${spawnError?.message ?? "no pid"}`);
    }
    const pid = child.pid;
    this.#child = child;
    this.#pid = pid;
    this.#exited = false;
    const tracked = { pid, exited: false };
    this.#exit = new Promise<void>((resolve) =>
      child.once("exit", () => {
        tracked.exited = true;
        untrack(tracked);
        if (this.#child === child) this.#exited = true;
        resolve();
      })
    );
    track(tracked);
    // Do not keep the process alive just for this server: stop() or the exit hook kills it.
    unrefChild(child);

    const deadline = performance.now() + this.#readyTimeoutMs;
    let foreign = false;
    let lastProbe = "";
    while (!this.#exited && performance.now() < deadline) {
      try {
        const server = await info(this.port, "server", 2000);
        if (Number(server.process_id) === pid) {
          this.#version = server.redis_version ?? "?";
          return undefined;
        }
        foreign = true; // somebody else's server answered on "our" port
        break;
      } catch (e) {
        lastProbe = (e as Error).message;
        await sleep(25);
      }
    }
    const where = `${this.port}${this.busPort ? `/${this.busPort}` : ""}`;
    if (!this.#exited) {
      await this.kill();
      if (foreign) return `port ${this.port} was answered by another process`;
      throw new Error(
        `${this.kind} on port ${where} (pid ${pid}) not ready after ${this.#readyTimeoutMs} ms ` +
          `(last probe: ${lastProbe})\n  redis-server ${this.argv.join(" ")}\n--- output ---\n${this.#tail}`,
      );
    }
    await sleep(20); // let the pipes drain
    const error = `${this.kind} exited during startup on port ${where} (code ${child.exitCode}, signal ` +
      `${child.signalCode})\n  redis-server ${this.argv.join(" ")}\n--- output ---\n${this.#tail}`;
    if (PORT_CLASH.test(this.#tail)) return error;
    throw new Error(error);
  }

  async client(options?: ClientOptions): Promise<Client> {
    const c = createClient({ ...this.#clientOptions, ...options, url: this.url }) as Client;
    c.on("error", () => {});
    await c.connect();
    this.#clients.push(c);
    return c;
  }

  pause(): void {
    pause(this.#pid);
  }

  resume(): void {
    resume(this.#pid);
  }

  killSync(): void {
    if (!this.#exited) tryKill(this.#pid, "SIGKILL");
  }

  async kill(): Promise<void> {
    if (this.#exited) return;
    tryKill(this.#pid, "SIGKILL");
    // The timer keeps the event loop alive until the (unref'd) child has reported its exit.
    await withTimeout(this.#exit, 5000, `pid ${this.#pid} did not exit after SIGKILL`).catch(() => {});
  }

  async restart(downMs = 0): Promise<void> {
    if (this.#stopped) throw new Error(`${this.kind} on port ${this.port} was stopped`);
    await this.kill();
    if (downMs > 0) await sleep(downMs);
    const clash = await this.launch();
    if (clash !== undefined) throw new Error(`restart on the same port failed: ${clash}`);
  }

  async stop(): Promise<void> {
    await Promise.all(this.#clients.splice(0).map((c) => closeQuietly(() => c.disconnect())));
    await this.kill();
    if (this.#stopped) return;
    this.#stopped = true;
    releasePort(this.port);
    releasePort(this.busPort);
    if (this.#ownDir) removeDir(this.dir);
  }
}

function unrefChild(child: ChildProcess): void {
  try {
    child.unref();
    for (const s of [child.stdout, child.stderr] as Array<{ unref?: () => void } | null>) s?.unref?.();
  } catch { /* not supported on this runtime: fine, stop() still kills it */ }
}
