// Harness: the one place that starts PostgreSQL servers (for the SQL fencing tests, the chaos runs at the
// resource, the benchmarks and the demo), as harness/redis.ts does redis-servers.
//
// A server is Debian's `postgresql` package (its binaries in /usr/lib/postgresql/<version>/bin; `.ci/run` installs
// it when missing), in a temp dir of its own (a copy of a template data dir that initdb made once per machine and
// PostgreSQL version, kept in $TMPDIR for every later process), on a free
// loopback port (harness/cleanup.ts hands the ports out; the machine's own 5432 is never touched), with trust
// authentication and durability off (fsync, synchronous_commit, full_page_writes: a test database needs no crash
// safety). PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user (setpriv, which execs,
// so the pid is the postmaster's own). It is ready once its postmaster.pid names that pid and says "ready"; a port
// somebody else took meanwhile makes the start retry on a new one. It is stopped by that pid (SIGQUIT: immediate
// shutdown, then SIGKILL), never by name; servers still running when the process exits are SIGKILLed by the exit
// hook, and their backends follow their postmaster out.
//
//   if (await hasPostgres()) {
//     const pg = await startPostgres();     // pg.url: postgres://postgres@127.0.0.1:PORT/postgres
//     pg.pause(); pg.resume();              // SIGSTOP / SIGCONT the postmaster and its backends
//     await pg.stop();                      // SIGQUIT, SIGKILL, temp dir removed
//   }
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { releasePort, removeDir, reservePort, tempDir, track, tryKill, untrack } from "./cleanup.ts";
import { sleep } from "./wait.ts";

/** A throwaway PostgreSQL server. */
export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication: no password). */
  readonly url: string;
  readonly port: number;
  /** The postmaster's pid. */
  readonly pid: number;
  readonly dir: string;
  /** The server's major version, e.g. "15". */
  readonly version: string;
  /** The last 16 KB of its log. */
  log(): string;
  /** SIGSTOP the postmaster and every backend: connections stay open, nothing is answered. */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
  /** Immediate shutdown (SIGQUIT, then SIGKILL after 5 s), its port released and its temp dir removed. */
  stop(): Promise<void>;
}

export interface PostgresOptions {
  /** The temp dir is named `redlease-<label>-XXXXXX` (default "pg"). */
  label?: string;
  /** More `-c name=value` settings (e.g. `{ max_connections: "200" }`). */
  settings?: Record<string, string>;
  /** How long a start may take (default 30000 ms). */
  readyTimeoutMs?: number;
}

const LOG_TAIL = 16_384;
const ATTEMPTS = 5;
const PORT_CLASH = /could not bind|Address already in use|could not create any TCP\/IP sockets/i;

/** The directory holding `initdb` and `postgres`, or undefined when PostgreSQL is not installed. */
export function postgresBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  try {
    const versions = readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
    for (const v of versions) if (existsSync(join(root, v, "bin", "postgres"))) return join(root, v, "bin");
  } catch { /* not Debian's layout */ }
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (dir && existsSync(join(dir, "initdb")) && existsSync(join(dir, "postgres"))) return dir;
  }
  return undefined;
}

/** Whether a PostgreSQL server can be started here (its binaries are installed). */
export function hasPostgres(): boolean {
  return postgresBinDir() !== undefined;
}

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;

/** The `postgres` user's uid and gid, for running the server when this process is root. */
function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

/** argv prefixed so that it runs as the `postgres` user when this process is root (setpriv execs: same pid). */
function asPostgres(argv: string[]): [string, string[]] {
  if (!isRoot) return [argv[0], argv.slice(1)];
  const { uid, gid } = postgresUser();
  return ["setpriv", [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "--", ...argv]];
}

function chownTree(path: string): void {
  if (!isRoot) return;
  const { uid, gid } = postgresUser();
  execFileSync("chown", ["-R", `${uid}:${gid}`, path]);
}

let template: string | undefined;

/**
 * A data directory initdb'd once per machine and PostgreSQL binaries (`$TMPDIR/redlease-pg-template-<hash>`), copied
 * for each server: initdb takes a second or two, a copy a tenth of that. Made in a temp dir and renamed into place,
 * so that processes starting together never see half of one (the loser of the race removes its own).
 */
function templateDir(bin: string): string {
  if (template && existsSync(join(template, "PG_VERSION"))) return template;
  const key = bin.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "");
  const shared = join(tmpdir(), `redlease-pg-template-${key}`);
  if (!existsSync(join(shared, "data", "PG_VERSION"))) {
    const dir = tempDir("pg-initdb");
    chownTree(dir);
    const [cmd, args] = asPostgres([
      join(bin, "initdb"),
      "-D",
      join(dir, "data"),
      "-U",
      "postgres",
      "-A",
      "trust",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
    ]);
    execFileSync(cmd, args, { stdio: "pipe", cwd: dir });
    try {
      renameSync(dir, shared);
    } catch { /* made by another process meanwhile: use that one */ }
    removeDir(dir);
  }
  return template = join(shared, "data");
}

/** Start a throwaway PostgreSQL server on a free loopback port; throws if PostgreSQL is not installed. */
export async function startPostgres(opts: PostgresOptions = {}): Promise<PostgresServer> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("PostgreSQL is not installed (Debian: apt-get install postgresql)");
  const version = readFileSync(join(templateDir(bin), "PG_VERSION"), "utf8").trim();
  const dir = tempDir(opts.label ?? "pg");
  const data = join(dir, "data");
  cpSync(templateDir(bin), data, { recursive: true });
  chownTree(dir);
  let lastError = "";
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const port = await reservePort();
    const settings: Record<string, string> = {
      listen_addresses: "127.0.0.1",
      unix_socket_directories: dir,
      fsync: "off",
      synchronous_commit: "off",
      full_page_writes: "off",
      max_connections: "100",
      shared_buffers: "32MB",
      logging_collector: "off",
      ...opts.settings,
    };
    const argv = [join(bin, "postgres"), "-D", data, "-p", String(port)];
    for (const [k, v] of Object.entries(settings)) argv.push("-c", `${k}=${v}`);
    const [cmd, args] = asPostgres(argv);
    const child: ChildProcess = spawn(cmd, args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    const onData = (d: unknown) => {
      log = (log + String(d)).slice(-LOG_TAIL);
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    let exited = false;
    const exit = new Promise<void>((resolve) => {
      child.on("exit", () => {
        exited = true;
        resolve();
      });
      child.on("error", (e) => {
        log += String(e);
        exited = true;
        resolve();
      });
    });
    const tracked = {
      pid: child.pid ?? -1,
      get exited() {
        return exited;
      },
    };
    track(tracked);
    const deadline = performance.now() + (opts.readyTimeoutMs ?? 30_000);
    let ready = false;
    while (!exited && performance.now() < deadline) {
      // postmaster.pid: pid, data dir, start time, port, socket dir, listen address, shm key, status ("ready").
      try {
        const lines = readFileSync(join(data, "postmaster.pid"), "utf8").split("\n");
        if (Number(lines[0]) === child.pid && lines[3]?.trim() === String(port) && lines[7]?.trim() === "ready") {
          ready = true;
          break;
        }
      } catch { /* not written yet */ }
      await sleep(20);
    }
    if (ready) {
      const pid = child.pid!;
      for (const h of [child.stdout, child.stderr, child]) (h as { unref?(): void } | null)?.unref?.();
      let stopped = false;
      return {
        url: `postgres://postgres@127.0.0.1:${port}/postgres`,
        port,
        pid,
        dir,
        version,
        log: () => log,
        pause: () => signalAll(pid, "SIGSTOP"),
        resume: () => signalAll(pid, "SIGCONT"),
        async stop() {
          if (stopped) return;
          stopped = true;
          signalAll(pid, "SIGCONT");
          tryKill(pid, "SIGQUIT");
          const t = performance.now();
          while (!exited && performance.now() - t < 5_000) await sleep(20);
          if (!exited) {
            tryKill(pid, "SIGKILL");
            await Promise.race([exit, sleep(5_000)]);
          }
          untrack(tracked);
          releasePort(port);
          removeDir(dir);
        },
      };
    }
    tryKill(child.pid ?? -1, "SIGKILL");
    await Promise.race([exit, sleep(5_000)]);
    untrack(tracked);
    releasePort(port);
    lastError = log;
    if (!PORT_CLASH.test(log)) break;
  }
  removeDir(dir);
  throw new Error(`PostgreSQL did not start:\n${lastError}`);
}

/** Send `signal` to the postmaster `pid` and to every backend it forked (their parent pid is `pid`). */
function signalAll(pid: number, signal: NodeJS.Signals): void {
  const children: number[] = [];
  try {
    for (const p of readdirSync("/proc")) {
      if (!/^\d+$/.test(p)) continue;
      try {
        const stat = readFileSync(`/proc/${p}/stat`, "utf8");
        // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after its last ')'.
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
        if (ppid === pid) children.push(Number(p));
      } catch { /* gone meanwhile */ }
    }
  } catch { /* no /proc: the postmaster alone */ }
  if (signal === "SIGSTOP") {
    for (const c of children) tryKill(c, signal);
    tryKill(pid, signal);
  } else {
    tryKill(pid, signal);
    for (const c of children) tryKill(c, signal);
  }
}
