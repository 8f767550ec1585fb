// The `redlease` command line, spawned for real on the runtime running this file, against a throwaway
// redis-server. The commands it runs are tests/fixtures/cli_child.ts on the same runtime.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import process from "node:process";
import { after, before, describe, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { formatMs, parseArgs, parseDuration } from "../cli/_args.ts";
import { CliError } from "../cli/_common.ts";
import { resolveUrl } from "../cli/_connect.ts";
import { holdLabel } from "../cli/_run.ts";
import { fit, startStatus, statusText } from "../cli/_status.ts";
import { displayWidth, printable } from "../cli/_text.ts";
import { acquire, campaign, forceUnlock, inspect, LeaseLostError, release } from "../mod.ts";
import {
  type Client,
  freePort,
  holdsOf,
  type RedisServer,
  runtimeArgs,
  runtimeName,
  sleep,
  startRedis,
} from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";
import { FENCE_RETAIN_MS } from "../src/_defaults.ts";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const CLI = join(root, "cli", "redlease.ts");
const CHILD = join(here, "fixtures", "cli_child.ts");

/**
 * How this runtime runs `file`. On Node, the CLI and the fixture run as esbuild bundles of their source (made once, in
 * before()), with `redis` left to the repo's node_modules as under tsx: each of the ~100 processes the file starts
 * would otherwise pay the tsx loader's start (about 0.2 s each, 15 s of the file). Bun and Deno run the source. (The
 * published bin, which bundles node-redis's client, is tested by tests/package.node.test.ts.)
 */
const bundled = new Map<string, string>();
function runtimeArgsOf(file: string): [string, string[]] {
  const b = bundled.get(file);
  return b ? [process.execPath, [b]] : runtimeArgs(file);
}

/**
 * Bundle the CLI and the fixture for Node, into node_modules/ (one level below the root: the CLI reads
 * ../package.json from its own URL for --version, and the external `redis` resolves from there). Removed in after(),
 * or at exit if the run is cut short.
 */
async function bundleForNode(): Promise<void> {
  if (runtimeName() !== "node") return;
  process.on("exit", () => {
    for (const b of bundled.values()) rmSync(b, { force: true });
  });
  const { build } = await import("esbuild");
  for (const [file, out] of [[CLI, "redlease"], [CHILD, "cli_child"]]) {
    const outfile = join(root, "node_modules", `.redlease-test-${out}-${process.pid}.mjs`);
    await build({
      entryPoints: [file],
      bundle: true,
      format: "esm",
      platform: "node",
      target: "node20",
      external: ["redis"],
      outfile,
      logLevel: "silent",
    });
    bundled.set(file, outfile);
  }
}

interface Result {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  ms: number;
  killed: boolean;
}

interface Running {
  readonly proc: ChildProcess;
  readonly done: Promise<Result>;
  /** Resolves with the match once stdout matches `re`; rejects if the process ends first. */
  waitFor(re: RegExp): Promise<RegExpExecArray>;
}

interface Options {
  /** Variables to set (undefined removes one) on top of the test environment. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  timeoutMs?: number;
  /** The command line prefix that runs the CLI (default: this runtime running cli/redlease.ts). */
  argv0?: [string, string[]];
  /** A pipe to the process's stdin (default: none). */
  stdin?: "pipe";
  /**
   * Start it in a new session, without a controlling terminal, so that a signal the test sends it is not taken
   * for one the terminal of whoever runs the tests sent to its whole foreground process group.
   */
  detached?: boolean;
}

let baseEnv: Record<string, string | undefined> = {};
const live = new Set<ChildProcess>();

function startCli(args: string[], o: Options = {}): Running {
  const [cmd, pre] = o.argv0 ?? runtimeArgsOf(CLI);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...baseEnv, ...o.env })) if (v !== undefined) env[k] = v;
  const t0 = performance.now();
  const proc = spawn(cmd, [...pre, ...args], {
    cwd: o.cwd ?? root,
    env,
    stdio: [o.stdin ?? "ignore", "pipe", "pipe"],
    detached: o.detached ?? false,
  });
  live.add(proc);
  let stdout = "";
  let stderr = "";
  let killed = false;
  const watchers: Array<() => void> = [];
  proc.stdout!.on("data", (d) => {
    stdout += d;
    for (const w of watchers) w();
  });
  proc.stderr!.on("data", (d) => (stderr += d));
  const timer = setTimeout(() => {
    killed = true;
    proc.kill("SIGKILL");
  }, o.timeoutMs ?? 30_000);
  const done = new Promise<Result>((resolve) => {
    proc.on("exit", (code, signal) => {
      const ms = performance.now() - t0;
      clearTimeout(timer);
      live.delete(proc);
      // Output may still be in the pipes; a command orphaned by a killed CLI could hold them open, so do not
      // wait for 'close' for long.
      const finish = () => {
        for (const w of watchers) w();
        resolve({ code, signal, stdout, stderr, ms, killed });
      };
      const grace = setTimeout(finish, 1_000);
      proc.once("close", () => {
        clearTimeout(grace);
        finish();
      });
    });
  });
  let ended = false;
  void done.then(() => (ended = true));
  return {
    proc,
    done,
    waitFor(re) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = re.exec(stdout);
          if (m) resolve(m);
          else if (ended) reject(new Error(`exited before printing ${re}; stdout: ${stdout}; stderr: ${stderr}`));
        };
        watchers.push(check);
        check();
        void done.then(() => setTimeout(check, 0));
      });
    },
  };
}

function cli(args: string[], o: Options = {}): Promise<Result> {
  return startCli(args, o).done;
}

/** The command line of the fixture command on this runtime. */
function child(...args: string[]): string[] {
  const [cmd, pre] = runtimeArgsOf(CHILD);
  return [cmd, ...pre, ...args];
}

/** A word for sh, single-quoted. */
const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** script(1) from util-linux, which runs a command on a pseudo-terminal; Linux only, like the CLI's check. */
const SCRIPT = process.platform === "linux" ? ["/usr/bin/script", "/bin/script"].find((p) => existsSync(p)) : undefined;

/** What the status line writes to clear the terminal's line (carriage return, erase line), as a RegExp source. */
const CLEAR = "\\r\\x1b\\[2K";

/** The state letter of a process in /proc/PID/stat (T: stopped), or "" if it is gone. */
function processState(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.charAt(stat.lastIndexOf(")") + 2);
  } catch {
    return "";
  }
}

/** stderr is exactly one `redlease: …` line matching `re`, and no stack trace. */
function oneLine(r: Result, re: RegExp): void {
  assert.equal(r.killed, false, `still running after the timeout; stderr: ${r.stderr}`);
  const lines = r.stderr.split("\n").filter((l) => l.trim() !== "");
  assert.equal(lines.length, 1, `expected one line on stderr, got:\n${r.stderr}`);
  assert.match(lines[0], /^redlease: /);
  assert.match(lines[0], re);
  assert.doesNotMatch(r.stderr, /^\s+at /m);
}

/**
 * Terminal columns a string takes, counted here independently of the CLI: East Asian Wide and Fullwidth
 * characters (the CJK blocks, Hangul, fullwidth forms) and pictographic emoji take 2.
 */
function columns(s: string): number {
  let w = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    const wide = (c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0xa4cf) || (c >= 0xac00 && c <= 0xd7a3) ||
      (c >= 0xf900 && c <= 0xfaff) || (c >= 0xff00 && c <= 0xff60) || (c >= 0x1f300 && c <= 0x1faff);
    w += wide ? 2 : 1;
  }
  return w;
}

/** Everything written to this process's stderr while `fn` runs (what startStatus() draws). */
async function capturingStderr(fn: (writes: string[]) => Promise<void>): Promise<string[]> {
  const writes: string[] = [];
  const stderr = process.stderr as unknown as { write: unknown };
  const original = stderr.write;
  stderr.write = (s: string | Uint8Array, cb?: () => void) => {
    writes.push(String(s));
    cb?.();
    return true;
  };
  try {
    await fn(writes);
  } finally {
    stderr.write = original;
  }
  return writes;
}

/** Per-test timeout: Bun's default of 5 s is too short for tests that start several processes. */
const T = { timeout: 90_000 };

let seq = 0;
const unique = (what: string) => `cli-${what}-${Date.now()}-${seq++}`;

describe(`redlease CLI (${runtimeName()})`, () => {
  let srv: RedisServer;
  let admin: Client;
  let dir: string;
  before(async () => {
    await bundleForNode();
    srv = await startRedis();
    admin = await srv.client();
    dir = mkdtempSync(join(tmpdir(), "redlease-cli-"));
    baseEnv = { ...process.env, REDIS_URL: srv.url, NO_COLOR: "1" };
    for (const k of ["NAME", "PREFIX", "SERVER", "OWNER", "FENCE", "TOKEN", "DEBUG"]) {
      baseEnv[`REDLEASE_${k}`] = undefined;
    }
  });
  after(async () => {
    for (const p of live) p.kill("SIGKILL");
    for (const b of bundled.values()) rmSync(b, { force: true });
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("--help works for every command and documents the exit codes", T, async () => {
    const runs = await Promise.all([
      cli(["--help"]),
      cli(["run", "--help"]),
      cli(["inspect", "-h"]),
      cli(["help", "unlock"]),
      cli(["frobnicate"]),
    ]);
    for (const r of runs.slice(0, 4)) {
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, "");
      assert.match(r.stdout, /^Usage|Usage:/m);
      assert.match(r.stdout, /Exit codes:[\s\S]*\n {2}3 +busy[\s\S]*\n {2}4 +run: the lease was lost/);
    }
    assert.match(runs[0].stdout, /redlease run NAME[\s\S]*redlease inspect[\s\S]*redlease unlock NAME --force/);
    assert.match(runs[1].stdout, /--lease DURATION[\s\S]*--wait DURATION[\s\S]*--grace DURATION/);
    assert.match(runs[2].stdout, /--json/);
    assert.match(runs[3].stdout, /--force/);
    assert.equal(runs[4].code, 2);
    oneLine(runs[4], /unknown command 'frobnicate'/);
  });

  // docs/cli.md shows users what the CLI says; these keep the page and the program saying the same thing.
  test(
    "docs/cli.md quotes the CLI: the unknown-command line, the exit codes, Ctrl-C reaching CMD once",
    T,
    async () => {
      const page = readFileSync(new URL("../docs/cli.md", import.meta.url), "utf8");
      const [unknown, help] = await Promise.all([cli(["frobnicate"]), cli(["run", "--help"])]);
      const quoted = /`(redlease: unknown command 'frobnicate'[^`]*)`/.exec(page);
      assert.ok(quoted, "docs/cli.md quotes the unknown-command message");
      assert.equal(unknown.stderr.trim(), quoted[1]);
      // Every exit code in the page's table is in --help's list, and the other way round.
      const codesOf = (text: string, re: RegExp) => [...text.matchAll(re)].map((m) => m[1]).sort().join(" ");
      const table = page.slice(page.indexOf("| code | meaning |"));
      const docCodes = codesOf(table.slice(0, table.indexOf("\n\n")), /^\| ([\d+N, ]+|other) \|/gm);
      const helpCodes = codesOf(
        help.stdout.slice(help.stdout.indexOf("Exit codes:")),
        /^ {2}(\d[\d+N, ]*?|other) {2,}/gm,
      );
      assert.equal(docCodes, helpCodes);
      // Ctrl-C: both say a terminal's reaches CMD once (not forwarded a second time), and where it may come twice.
      assert.match(page, /Ctrl-C at a terminal reaches `CMD` once/);
      assert.match(help.stdout, /A Ctrl-C at a terminal is the exception:[\s\S]*does not send it\s+a second one/);
      for (const text of [page, help.stdout]) {
        assert.match(
          text,
          /Elsewhere[^.]*every SIGINT is forwarded, so\s+`?CMD`? may get two/,
        );
      }
    },
  );

  test("durations, options and URLs are parsed strictly (in-process)", T, () => {
    const d = (text: string, min = 0, infinite = false) => parseDuration("run", "lease", text, { min, infinite });
    assert.equal(d("500ms"), 500);
    assert.equal(d("30s"), 30_000);
    assert.equal(d("1.5s"), 1_500);
    assert.equal(d("2m"), 120_000);
    assert.equal(d("1h"), 3_600_000);
    assert.equal(d("1m30s"), 90_000);
    assert.equal(d(" 0 "), 0);
    assert.equal(d("inf", 0, true), Infinity);
    const usage = (fn: () => unknown, re: RegExp) =>
      assert.throws(fn, (e: unknown) => e instanceof CliError && e.code === 2 && re.test(e.message));
    usage(() => d("30"), /bad --lease '30': a unit is required/);
    usage(() => d("10x"), /expected a duration/);
    usage(() => d("s"), /expected a duration/);
    usage(() => d(""), /expected a duration/);
    usage(() => d("-1s"), /expected a duration/);
    usage(() => d("inf"), /expected a duration/);
    usage(() => d("10ms", 30), /must be at least 30ms/);
    usage(() => d("25d"), /expected a duration/);
    usage(() => d("597h"), /must be at most 2147483647ms/);
    assert.equal(formatMs(850), "850ms");
    assert.equal(formatMs(12_345), "12.3s");
    assert.equal(formatMs(125_000), "2m05s");
    assert.equal(formatMs(3_720_000), "1h02m");

    const spec = { lease: "value", fixed: "flag", help: "flag" } as const;
    const p = parseArgs("run", ["--lease=5s", "job", "--fixed", "cmd", "--lease", "x", "--", "y"], spec, 1);
    assert.deepEqual([...p.options], [["lease", "5s"], ["fixed", true]]);
    assert.deepEqual(p.positionals, ["job"]);
    assert.deepEqual(p.command, ["cmd", "--lease", "x", "--", "y"], "everything after CMD is CMD's");
    assert.deepEqual(parseArgs("run", ["job", "--", "--fixed"], spec, 1).command, ["--fixed"]);
    usage(() => parseArgs("run", ["--lease"], spec, 1), /option '--lease' needs a value/);
    usage(() => parseArgs("run", ["--fixed=1"], spec, 1), /takes no value/);
    usage(() => parseArgs("run", ["-x"], spec, 1), /unknown option '-x'/);

    assert.equal(resolveUrl("run", "rediss://u:p@host:6380/2"), "rediss://u:p@host:6380/2");
    usage(() => resolveUrl("run", "redis://host/x"), /the path must be a database number/);
    usage(() => resolveUrl("run", "redis://:6379"), /bad --url/);
  });

  test(
    "run passes REDLEASE_NAME, _PREFIX, _FENCE, _TOKEN and _OWNER and exits with the command's code",
    T,
    async () => {
      const name = unique("env");
      const [r, anon] = await Promise.all([
        cli(["run", name, "--prefix", "jobs", "--", ...child("env", "7")]),
        cli(["run", `${name}-anon`, ...child("env", "0")]), // no `--`: the first word after NAME starts CMD
      ]);
      assert.equal(r.code, 7, r.stderr);
      assert.equal(r.stderr, "");
      const env = JSON.parse(r.stdout);
      assert.equal(env.name, name);
      assert.equal(env.prefix, "jobs");
      assert.match(env.token, /^rl1\./);
      // The fence record outlives the release for a few seconds: it is the token the command was given.
      const info = await inspect(admin, name, { prefix: "jobs" });
      assert.equal(info.held, false, "released after the command exited");
      assert.equal(env.fence, String(info.fence));
      assert.ok(Number(env.fence) > 0);

      assert.equal(anon.code, 0, anon.stderr);
      const e2 = JSON.parse(anon.stdout);
      assert.equal(e2.name, `${name}-anon`);
      assert.equal(e2.prefix, "redlease");
      // A random owner id (src/_protocol.ts, attemptId), then the run's label.
      assert.match(e2.owner, new RegExp(`^[A-Za-z0-9_-]{17,} host=${hostname()} pid=\\d+ cmd=\\S+`));
      assert.equal(e2.fence, String((await inspect(admin, `${name}-anon`)).fence));

      const owner = await cli(["run", name, "--owner", "x", "--", ...child("env", "0")]);
      assert.equal(owner.code, 2, "--owner is gone: a nested run shares the hold through REDLEASE_TOKEN");
    },
  );

  test(
    "run --shared runs beside shared holders and --permits N beside N-1; a run that cannot join exits 3",
    T,
    async () => {
      const name = unique("kinds");
      const reader = await acquire(admin, name, { shared: true });
      try {
        const shared = await cli(["run", name, "--shared", "--wait", "0", "--", ...child("env", "0")]);
        assert.equal(shared.code, 0, shared.stderr);
        assert.ok(Number(JSON.parse(shared.stdout).fence) > reader.fence);
        const exclusive = await cli(["run", name, "--wait", "0", "--", ...child("env", "0")]);
        assert.equal(exclusive.code, 3, "an exclusive run waits for the reader");
        const permits = await cli(["run", name, "--permits", "2", "--wait", "0", "--", ...child("env", "0")]);
        assert.equal(permits.code, 3);
        assert.match(permits.stderr, /held shared, which this request cannot join/);
      } finally {
        await release(reader);
      }
      const permit = await acquire(admin, `${name}-p`, { permits: 2 });
      try {
        const second = await cli(["run", `${name}-p`, "--permits", "2", "--wait", "0", "--", ...child("env", "0")]);
        assert.equal(second.code, 0, second.stderr);
        const third = await cli(["run", `${name}-p`, "--permits", "3", "--wait", "0", "--", ...child("env", "0")]);
        assert.equal(third.code, 3);
        assert.match(third.stderr, /held as 2 permits/);
      } finally {
        await release(permit);
      }
      for (const bad of [["--permits", "0"], ["--permits", "x"], ["--permits", "2", "--shared"]]) {
        const r = await cli(["run", name, ...bad, "--", ...child("env", "0")]);
        assert.equal(r.code, 2, `${bad.join(" ")}: ${r.stderr}`);
      }
    },
  );

  test(
    "elect runs the command while leading, with the term as REDLEASE_FENCE; --wait 0 exits 3 while another leads",
    T,
    async () => {
      const name = unique("elect");
      const r = await cli(["elect", name, "--", ...child("env", "0")]);
      assert.equal(r.code, 0, r.stderr);
      const env = JSON.parse(r.stdout);
      assert.ok(Number(env.fence) > 0);
      const leader = await campaign(admin, name);
      try {
        const busy = await cli(["elect", name, "--wait", "0", "--", ...child("env", "0")]);
        assert.equal(busy.code, 3, busy.stderr);
        assert.ok(leader.fence > Number(env.fence), "a later term");
      } finally {
        await release(leader);
      }
    },
  );

  test("observe prints the state, then every change, and exits after --count states", T, async () => {
    const name = unique("observe");
    const run = startCli(["observe", name, "--json", "--count", "3"]);
    await run.waitFor(/"leader":null/);
    const leader = await campaign(admin, name, { value: "v1", label: "scheduler on web-1" });
    await run.waitFor(/"value":"v1"/);
    const leading = await cli(["observe", name, "--count", "1"]);
    const id = leader.owner.slice(0, leader.owner.indexOf(" "));
    assert.equal(leading.stdout.split("\n")[1], `term ${leader.fence}: scheduler on web-1 (${id}) = v1`);
    await release(leader);
    const r = await run.done;
    assert.equal(r.code, 0, r.stderr);
    const states = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(states.map((st: { leader: string | null }) => st.leader), [null, leader.owner, null]);
    assert.equal(states[1].term, leader.fence);
    assert.deepEqual(states.map((st: { label: string | null }) => st.label), [null, "scheduler on web-1", null]);
    const text = await cli(["observe", name, "--count", "1"]);
    assert.match(text.stdout, /nobody leads \(last term \d+\)/);
  });

  test("watch prints the state, then each grant and release as it happens, and SIGTERM ends it with 0", T, async () => {
    const name = unique("watch");
    const run = startCli(["watch", name, "--json"], { detached: true });
    await run.waitFor(/"type":"state"/);
    const lease = await acquire(admin, name, { label: "job on web-1", leaseMs: 30_000 });
    await run.waitFor(/"type":"granted"/);
    await release(lease);
    await run.waitFor(/"type":"released"/);
    process.kill(run.proc.pid!, "SIGTERM");
    const r = await run.done;
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l: { type: string }) => l.type), ["state", "granted", "released"]);
    assert.equal(lines[1].holder.owner, lease.owner);
    assert.equal(lines[1].holder.label, "job on web-1");
    assert.equal(lines[1].state.fence, lease.fence);
    assert.equal(lines[2].state.held, false);
    const text = await cli(["watch", name, "--count", "1"]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout.split("\n")[1], new RegExp(`^free \\(fence ${lease.fence}\\)$`));
  });

  test("watch's line for a hold that ended gives that hold's fence, not the lease's after it", T, async () => {
    const name = unique("watch-ended");
    const run = startCli(["watch", name], { detached: true });
    await run.waitFor(/^free/m);
    const first = await acquire(admin, name, { leaseMs: 30_000 });
    const second = acquire(admin, name, { leaseMs: 500, waitMs: 10_000 });
    await run.waitFor(/^granted/m);
    await sleep(300);
    // Handed to the waiter (a new fence), whose hold then expires (no record left: fence 0 after it).
    await release(first);
    const handed = await second;
    await run.waitFor(/^expired/m);
    process.kill(run.proc.pid!, "SIGTERM");
    const r = await run.done;
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^released exclusive: .*, fence ${first.fence}$`, "m"), r.stdout);
    assert.match(r.stdout, new RegExp(`^expired exclusive: .*, fence ${handed.fence}$`, "m"), r.stdout);
  });

  test(
    "a run inside a run of the same lease runs under its hold (REDLEASE_TOKEN), at once; another lease waits",
    T,
    async () => {
      const name = unique("nested");
      const [cmd, pre] = runtimeArgsOf(CLI);
      const nested = (lease: string, code: string) =>
        child("exec", cmd, ...pre, "run", lease, "--wait", "0", "--", ...child("env", code));
      // --wait 0 on the inner run: were it to acquire instead, it would find the lease busy (exit 3).
      const r = await cli(["run", name, "--wait", "0", "--", ...nested(name, "5")]);
      assert.equal(r.code, 5, r.stderr);
      assert.equal(r.stderr, "");
      const inner = JSON.parse(r.stdout);
      const info = await inspect(admin, name);
      assert.equal(info.held, false, "the outer run released it; the inner one left that to it");
      assert.equal(inner.fence, String(info.fence), "the inner command got the outer hold's fence");

      // Another name (or prefix) is another lease: the inner run acquires it on its own.
      const other = await cli(["run", name, "--wait", "0", "--", ...nested(`${name}-b`, "0")]);
      assert.equal(other.code, 0, other.stderr);
      assert.equal(JSON.parse(other.stdout).name, `${name}-b`);
      assert.notEqual(JSON.parse(other.stdout).token, inner.token);

      // A token whose hold is gone: the inner run says so and exits 4, without running its command.
      const gone = await cli(["run", name, "--", ...child("env", "0")], {
        env: {
          REDLEASE_NAME: name,
          REDLEASE_PREFIX: "redlease",
          REDLEASE_SERVER: inner.server,
          REDLEASE_TOKEN: inner.token,
        },
      });
      assert.equal(gone.code, 4, gone.stderr);
      oneLine(gone, /lost lease .*the enclosing run no longer holds it/);
      assert.equal(gone.stdout, "");

      // The same name on another Redis is another lease: acquired there, not resumed.
      const other2 = await startRedis();
      try {
        const [c2, p2] = runtimeArgsOf(CLI);
        const there = await cli([
          "run",
          name,
          "--wait",
          "0",
          "--",
          ...child("exec", c2, ...p2, "run", name, "--url", other2.url, "--wait", "0", "--", ...child("env", "0")),
        ]);
        assert.equal(there.code, 0, there.stderr);
        const e3 = JSON.parse(there.stdout);
        assert.notEqual(e3.token, inner.token);
        assert.notEqual(e3.server, inner.server);
      } finally {
        await other2.stop();
      }

      // An inner --fixed run renews the enclosing hold like the outer one: a command longer than its --lease runs on.
      // (A 1 s lease, the command twice that: with 300 ms, renewals of a loaded machine missed the deadline.)
      const work = mkdtempSync(join(dir, "nested-"));
      const fixed = await cli([
        "run",
        name,
        "--wait",
        "0",
        "--",
        ...child(
          "exec",
          cmd,
          ...pre,
          "run",
          name,
          "--fixed",
          "--lease",
          "1s",
          "--",
          ...child("critical", work, "2000"),
        ),
      ]);
      assert.equal(fixed.code, 0, fixed.stderr);
      assert.equal(fixed.stderr, "");
    },
  );

  test("three concurrent runs on one name never overlap (checked by the commands themselves)", T, async () => {
    const name = unique("mutex");
    const work = mkdtempSync(join(dir, "mutex-"));
    const runs = await Promise.all(
      [0, 1, 2].map(() =>
        cli(["run", name, "--wait", "40s", "--", ...child("critical", work, "700")], { timeoutMs: 60_000 })
      ),
    );
    for (const r of runs) {
      assert.equal(r.killed, false);
      assert.equal(r.code, 0, r.stderr);
    }
    assert.equal(existsSync(join(work, "overlap")), false, "two commands were inside at the same time");
    const fences = readFileSync(join(work, "fences"), "utf8").trim().split("\n").map(Number);
    assert.equal(fences.length, 3);
    for (let i = 1; i < fences.length; i++) assert.ok(fences[i] > fences[i - 1], `fences increase: ${fences}`);
    assert.equal((await inspect(admin, name)).held, false);
  });

  test(
    "--wait 0 on a busy lease exits 3 at once without running the command; --wait 300ms after waiting",
    T,
    async () => {
      const name = unique("busy");
      const lease = await acquire(admin, name);
      try {
        const marker = join(dir, `${name}.ran`);
        const [now, later] = await Promise.all([
          cli(["run", name, "--wait", "0", "--", ...child("touch", marker)]),
          cli(["run", name, "--wait", "300ms", "--", ...child("touch", marker)]),
        ]);
        assert.equal(now.code, 3, now.stderr);
        oneLine(now, new RegExp(`lease '${name}' is busy.*--wait 0`));
        assert.equal(later.code, 3, later.stderr);
        oneLine(later, /is busy.*waited/);
        assert.equal(existsSync(marker), false, "the command must not run");
        const info = await inspect(admin, name);
        assert.deepEqual(holdsOf(info), [{ owner: lease.owner, holds: 1 }]);
        assert.equal(info.waiters, 0, "a timed-out wait leaves no queue entry");
      } finally {
        await release(lease);
      }
    },
  );

  test("losing the lease (force-unlocked) sends SIGTERM to the command and exits 4 with one line", T, async () => {
    const name = unique("lost");
    const file = join(dir, `${name}.signals`);
    const run = startCli(["run", name, "--lease", "1500ms", "--", ...child("trap", file, "0")]);
    await run.waitFor(/ready/);
    assert.equal(await forceUnlock(admin, name), true, "the CLI held the lease");
    const r = await run.done;
    assert.equal(r.code, 4, r.stderr);
    oneLine(r, new RegExp(`lost lease '${name}': Redis reports it is no longer held.*SIGTERM`));
    assert.equal(readFileSync(file, "utf8"), "SIGTERM\n");
    assert.ok(r.ms < 20_000, `took ${r.ms} ms`);
  });

  test("a command that ignores SIGTERM after the loss is killed after --grace", T, async () => {
    const name = unique("grace");
    const file = join(dir, `${name}.signals`);
    const run = startCli(["run", name, "--lease", "1500ms", "--grace", "300ms", "--", ...child("ignore", file)]);
    await run.waitFor(/ready/);
    assert.equal(await forceUnlock(admin, name), true);
    const r = await run.done;
    assert.equal(r.killed, false, `the CLI never exited; stderr: ${r.stderr}`);
    assert.equal(r.code, 4, r.stderr);
    assert.match(
      r.stderr,
      /^redlease: lost lease .*\nredlease: the command was still running 300ms after SIGTERM: sent SIGKILL\n$/,
    );
    const [pid, ...signals] = readFileSync(file, "utf8").trim().split("\n");
    assert.deepEqual(signals, ["SIGTERM"]);
    assert.throws(() => process.kill(Number(pid), 0), "the command is gone");
  });

  test("a fixed lease (--fixed) stops the command when it runs out", T, async () => {
    const name = unique("fixed");
    const file = join(dir, `${name}.signals`);
    const run = startCli(["run", name, "--fixed", "--lease", "4s", "--", ...child("trap", file, "0")]);
    await run.waitFor(/ready/);
    const r = await run.done;
    assert.equal(r.code, 4, r.stderr);
    oneLine(r, /lost lease .*its fixed lease of 4s ran out/);
    assert.equal(readFileSync(file, "utf8"), "SIGTERM\n");
  });

  test("SIGTERM and SIGINT sent to the CLI are forwarded to the command, whose code is the exit code", T, async () => {
    for (const [sig, code] of [["SIGTERM", 42], ["SIGINT", 43]] as const) {
      const name = unique("fwd");
      const file = join(dir, `${name}.signals`);
      // Detached: with no terminal, SIGINT can only have been sent to the CLI alone, so it must be forwarded.
      const run = startCli(["run", name, "--", ...child("trap", file, String(code))], { detached: true });
      await run.waitFor(/ready/);
      // process.kill, not proc.kill: Deno's proc.kill() makes the exit report the signal, not the exit code.
      process.kill(run.proc.pid!, sig);
      const r = await run.done;
      assert.equal(r.code, code, `${sig}: ${r.stderr}`);
      assert.equal(r.stderr, "");
      assert.equal(readFileSync(file, "utf8"), `${sig}\n`);
      assert.equal((await inspect(admin, name)).held, false, "released after the command exited");
    }
  });

  test(
    "on a terminal, one Ctrl-C is one SIGINT to the command (not forwarded again); SIGTERM to the CLI still is",
    { ...T, skip: SCRIPT ? false : "needs Linux and script(1) (util-linux) for a pseudo-terminal" },
    async () => {
      // script(1) starts a session on a new pseudo-terminal; sh, the CLI and the command it runs are that
      // terminal's foreground process group. A Ctrl-C byte written to it makes the tty driver send SIGINT to the
      // whole group, as a Ctrl-C typed at a shell prompt does. The command records every signal it gets. (sh
      // does not exec the CLI, since script(1) stops itself when its child stops; it traps SIGINT to outlive
      // the Ctrl-C, as an interactive shell would.)
      for (const [how, code, expected] of [["ctrl-c", 43, "SIGINT\n"], ["SIGTERM", 44, "SIGTERM\n"]] as const) {
        const name = unique("tty");
        const file = join(dir, `${name}.signals`);
        const [cmd, pre] = runtimeArgsOf(CLI);
        const cliLine = [cmd, ...pre, "run", name, "--", ...child("record", file, String(code))].map(shellQuote);
        const run = startCli([], {
          argv0: [SCRIPT!, ["-qfec", `trap : INT; ${cliLine.join(" ")}; exit $?`, "/dev/null"]],
          stdin: "pipe",
          env: { SHELL: "/bin/sh" },
        });
        try {
          const [, ppid] = await run.waitFor(/ready (\d+)\r?\n/);
          const cliPid = Number(ppid);
          if (how === "ctrl-c") {
            // The CLI is stopped until the command has taken the terminal's SIGINT: a SIGINT forwarded before
            // the command ran would merge with the one still pending (a process has one pending SIGINT at most)
            // and hide a duplicate. Without the stop, the old code's duplicate showed in only 6 runs of 10 here.
            process.kill(cliPid, "SIGSTOP");
            for (let i = 0; i < 500 && processState(cliPid) !== "T"; i++) await sleep(10);
            assert.equal(processState(cliPid), "T", "the CLI stopped");
            run.proc.stdin!.write("\x03");
            for (let i = 0; i < 500 && !(existsSync(file) && readFileSync(file, "utf8") !== ""); i++) await sleep(10);
            process.kill(cliPid, "SIGCONT"); // it now handles its SIGINT; the command exits 1 s after its first
          } else {
            process.kill(cliPid, "SIGTERM"); // to the CLI alone, while it is in the terminal's foreground
          }
          const r = await run.done;
          assert.equal(r.killed, false, `${how}: still running after the timeout; output: ${r.stdout}`);
          assert.equal(readFileSync(file, "utf8"), expected, `${how}: the signals the command got`);
          assert.equal(r.code, code, `${how}: ${r.stdout}`);
          assert.equal((await inspect(admin, name)).held, false, "released after the command exited");
        } finally {
          run.proc.stdin!.end();
        }
      }
    },
  );

  test("a signal while waiting for the lease cancels the wait and exits 128+N", T, async () => {
    const name = unique("waitsig");
    const lease = await acquire(admin, name);
    try {
      const marker = join(dir, `${name}.ran`);
      const run = startCli(["run", name, "--wait", "inf", "--", ...child("touch", marker)]);
      // Wait until the CLI has queued for the lease.
      for (let i = 0; i < 400 && (await inspect(admin, name)).waiters === 0; i++) await sleep(50);
      assert.equal((await inspect(admin, name)).waiters, 1, "the CLI is queued");
      process.kill(run.proc.pid!, "SIGTERM");
      const r = await run.done;
      assert.equal(r.code, 143, r.stderr);
      assert.equal(existsSync(marker), false);
      assert.equal((await inspect(admin, name)).waiters, 0, "the cancelled wait left the queue");
    } finally {
      await release(lease);
    }
  });

  test("unreachable Redis, bad URL, bad duration and other mistakes: exit code and one line", T, async () => {
    const dead = `redis://127.0.0.1:${await freePort()}`;
    const cases: Array<[string[], Options, number, RegExp]> = [
      [["run", "x", "--url", dead, "--", "true"], {}, 5, /cannot connect to Redis at redis:\/\/127\.0\.0\.1:\d+: /],
      // REDIS_URL is used, and a password in it is not printed.
      [
        ["inspect"],
        { env: { REDIS_URL: dead.replace("//", "//user:secret@") } },
        5,
        /cannot connect to Redis at redis:\/\/user:\*\*\*@/,
      ],
      [["run", "x", "--url", "http://localhost:6379", "--", "true"], {}, 2, /bad --url .*redis:\/\/ or rediss:\/\//],
      [["inspect"], { env: { REDIS_URL: "localhost:6379/x" } }, 2, /bad REDIS_URL/],
      [["run", "x", "--lease", "10x", "--", "true"], {}, 2, /bad --lease '10x': expected a duration/],
      [["run", "x", "--frob", "--", "true"], {}, 2, /unknown option '--frob'/],
      [
        ["run", "x", "--", "redlease-test-no-such-command"],
        {},
        127,
        /cannot run 'redlease-test-no-such-command': command not found/,
      ],
    ];
    const results = await Promise.all(cases.map(([args, o]) => cli(args, o)));
    results.forEach((r, i) => {
      const [args, , code, re] = cases[i];
      assert.equal(r.code, code, `${args.join(" ")}: ${r.stderr}`);
      oneLine(r, re);
      assert.equal(r.stdout, "", args.join(" "));
    });
    // --url wins over REDIS_URL.
    const ok = await cli(["inspect", "--url", srv.url], { env: { REDIS_URL: dead } });
    assert.equal(ok.code, 0, ok.stderr);
  });

  test("inspect lists held leases as a table and as --json, filtered by PATTERN and --prefix", T, async () => {
    const base = unique("insp");
    const a = await acquire(admin, `${base}:a`, { label: "nightly report on web-3" });
    const b1 = await acquire(admin, `${base}:b`, { owner: "bob", leaseMs: 60_000 });
    const b2 = await acquire(admin, `${base}:b`, { owner: "bob", leaseMs: 60_000 });
    const other = await acquire(admin, `${base}:c`, { prefix: "other" });
    const odd = await acquire(admin, `${base}:{o}d%7D`); // '}' and '%' are percent-encoded in its key
    const waiterClient = await srv.client();
    const waiting = acquire(waiterClient, `${base}:a`, { waitMs: 30_000 });
    try {
      for (let i = 0; i < 200 && (await inspect(admin, `${base}:a`)).waiters === 0; i++) await sleep(25);
      const [json, table, prefixed] = await Promise.all([
        cli(["inspect", `${base}:*`, "--json"]),
        cli(["inspect", `${base}:*`]),
        cli(["--prefix", "other", "inspect", "--json"]),
      ]);
      assert.equal(json.code, 0, json.stderr);
      const list = JSON.parse(json.stdout);
      assert.deepEqual(list.map((l: { name: string }) => l.name), [`${base}:a`, `${base}:b`, `${base}:{o}d%7D`]);
      const [la, lb, lodd] = list;
      assert.equal(lodd.fence, odd.fence);
      assert.deepEqual(holdsOf(la), [{ owner: a.owner, holds: 1 }]);
      assert.equal(la.owners[0].label, "nightly report on web-3");
      assert.equal(lb.owners[0].label, null, "no label: null in JSON");
      assert.equal(la.held, true);
      assert.equal(la.fence, a.fence);
      assert.equal(la.waiters, 1);
      assert.ok(la.remainingMs > 0 && la.remainingMs <= 30_000, String(la.remainingMs));
      assert.deepEqual(holdsOf(lb), [{ owner: b1.owner, holds: 2 }]);
      assert.ok(b1.owner.endsWith(":bob"), "an owner string is scoped to its client");
      assert.equal(lb.fence, b1.fence);
      assert.ok(lb.remainingMs > 0 && lb.remainingMs <= 60_000);
      assert.equal(lb.waiters, 0);

      assert.equal(table.code, 0, table.stderr);
      const [where, ...rows] = table.stdout.trim().split("\n");
      // The server read (no credentials), the prefix and the pattern come first.
      assert.equal(where, `redis://127.0.0.1:${srv.port}/0, prefix 'redlease': 3 held leases match '${base}:*'`);
      assert.match(rows[0], /^NAME +KIND +OWNER +HOLDS +WEIGHT +REMAINING +FENCE +WAITERS +HOLDER$/);
      assert.equal(rows.length, 4);
      const id = a.owner.slice(0, a.owner.indexOf(" "));
      assert.match(
        rows[1],
        new RegExp(`^${base}:a +exclusive +${id} +1 +1 +[\\d.]+s +${a.fence} +1 +nightly report on web-3$`),
      );
      assert.match(rows[2], new RegExp(`^${base}:b +exclusive +[0-9a-f]{32}:bob +2 +1 +[\\d.]+s +${b1.fence} +0 +-$`));

      assert.equal(prefixed.code, 0, prefixed.stderr);
      const p = JSON.parse(prefixed.stdout);
      assert.deepEqual(p.map((l: { name: string }) => l.name), [`${base}:c`]);
      assert.equal(p[0].fence, other.fence);
    } finally {
      await release(a);
      const handedOver = await waiting.catch(() => undefined);
      if (handedOver) await release(handedOver);
      await release(b2);
      await release(b1);
      await release(other);
      await release(odd);
    }
    // Released: gone from the default listing, still a fence record for --all for FENCE_RETAIN_MS after the release.
    // Two CLI runs beside two other runtimes' suites on 2 cores once took longer than that, and found no record left
    // (27 Nov): a run that ends that late takes and releases the names again and asks once more.
    for (let attempt = 1;; attempt++) {
      const releasedAt = performance.now();
      const [gone, all] = await Promise.all([
        cli(["inspect", `${base}:*`]),
        cli(["inspect", `${base}:*`, "--json", "--all"]),
      ]);
      if (performance.now() - releasedAt > FENCE_RETAIN_MS - 1_000 && attempt < 3) {
        for (const n of ["a", "b", "{o}d%7D"]) await release(await acquire(admin, `${base}:${n}`));
        continue;
      }
      assert.equal(gone.code, 0, gone.stderr);
      assert.equal(
        gone.stdout,
        `redis://127.0.0.1:${srv.port}/0, prefix 'redlease': no held leases match '${base}:*'\n`,
      );
      const rec = JSON.parse(all.stdout);
      assert.deepEqual(rec.map((l: { name: string; held: boolean }) => [l.name, l.held]), [
        [`${base}:a`, false],
        [`${base}:b`, false],
        [`${base}:{o}d%7D`, false],
      ]);
      break;
    }
  });

  test(
    "inspect lists a lease in its lock delay: its vanished owner marked, and what is left of the delay",
    T,
    async () => {
      const name = unique("delay");
      // (A 1 s lease: a 100 ms one's grant came back too late on a loaded CI run, and its retry waited behind its own
      // delayed hold.)
      const gone = await acquire(admin, name, { leaseMs: 1_000, lockDelayMs: 60_000, label: "vanished" });
      while (!gone.signal.aborted) await sleep(10);
      await waitUntil("Redis expired the hold into its lock delay", 10_000, async () => {
        return !(await inspect(admin, name)).held || "still held";
      });
      const [table, json] = await Promise.all([cli(["inspect", name]), cli(["inspect", name, "--json"])]);
      assert.equal(table.code, 0, table.stderr);
      const rows = table.stdout.trim().split("\n");
      assert.equal(rows.length, 3, table.stdout);
      const id = gone.owner.slice(0, gone.owner.indexOf(" "));
      assert.match(
        rows[2],
        new RegExp(`^${name} +exclusive +${id} \\(delayed\\) +1 +1 +delay [\\d.]+s +${gone.fence} +0 +vanished$`),
      );
      const [info] = JSON.parse(json.stdout);
      assert.deepEqual([info.held, info.owners, info.delayed.map((o: { owner: string }) => o.owner)], [
        false,
        [],
        [gone.owner],
      ]);
      assert.equal(info.delayed[0].lockDelayMs, 60_000);
      assert.ok(info.delayMs > 50_000 && info.delayMs <= 60_000, String(info.delayMs));
      assert.equal(await forceUnlock(admin, name), true);
    },
  );

  test("inspect shows weighted permits: T of N taken, and each holder's weight", T, async () => {
    const name = unique("weights");
    const heavy = await acquire(admin, name, { permits: 4, weight: 3 });
    const light = await acquire(admin, name, { permits: 4 });
    try {
      const [table, json] = await Promise.all([cli(["inspect", name]), cli(["inspect", name, "--json"])]);
      assert.equal(table.code, 0, table.stderr);
      const row = table.stdout.trim().split("\n")[2];
      assert.match(row, new RegExp(`^${name} +4 of 4 permits +\\S+, \\S+ +1, 1 +(3, 1|1, 3) +`), row);
      const [info] = JSON.parse(json.stdout);
      assert.equal(info.permits, 4);
      assert.equal(info.permitsTaken, 4);
      assert.deepEqual(info.owners.map((o: { weight: number }) => o.weight).sort(), [1, 3]);
    } finally {
      await release(heavy);
      await release(light);
    }
  });

  test("a run labels its hold host=… pid=… cmd=…; inspect shows it in HOLDER and in --json", T, async () => {
    const name = unique("label");
    const file = join(dir, `${name}.signals`);
    const cmd = child("trap", file, "0");
    const run = startCli(["run", name, "--", ...cmd], { detached: true });
    try {
      await run.waitFor(/ready/);
      // The CLI's own pid; the command cut to 120 characters.
      const label = holdLabel(cmd).replace(`pid=${process.pid} `, `pid=${run.proc.pid} `);
      assert.ok(label.startsWith(`host=${hostname()} pid=${run.proc.pid} cmd=${cmd[0]}`), label);
      const [table, json] = await Promise.all([cli(["inspect", name]), cli(["inspect", name, "--json"])]);
      assert.equal(table.code, 0, table.stderr);
      const rows = table.stdout.trim().split("\n");
      assert.equal(rows[0], `redis://127.0.0.1:${srv.port}/0, prefix 'redlease': 1 held lease matches '${name}'`);
      assert.match(rows[1], /^NAME .* HOLDER$/);
      assert.ok(rows[2].endsWith(` ${label}`), rows[2]);
      const [info] = JSON.parse(json.stdout);
      assert.equal(info.owners[0].label, label);
      assert.ok(info.owners[0].owner.endsWith(` ${label}`));
      assert.equal((await inspect(admin, name)).owners[0].label, label);
      // Cut and cleaned: one line, within the library's limit.
      const long = holdLabel(["sh", "-c", `echo 'a\nb'; ${"x".repeat(300)}`]);
      assert.equal(long, `host=${hostname()} pid=${process.pid} cmd=sh -c echo 'a b'; ${"x".repeat(120 - 19)}…`);
    } finally {
      process.kill(run.proc.pid!, "SIGTERM");
      await run.done;
    }
  });

  test("a hold's label is at most the library's 256 UTF-16 units, whatever the command and hostname", T, async () => {
    // An emoji is one code point but two UTF-16 units, which is what the library counts.
    const rockets = "🚀".repeat(130);
    for (
      const label of [holdLabel([rockets]), holdLabel([rockets], "🖥".repeat(100)), holdLabel(["x"], "h".repeat(300))]
    ) {
      assert.ok(label.length <= 256, `${label.length} UTF-16 units: ${label}`);
      assert.doesNotMatch(label, /\p{Cs}/u, "whole code points only");
      assert.match(label, /^host=\S+ pid=\d+ cmd=\S/);
    }
    assert.ok(holdLabel([rockets]).endsWith("🚀…"), holdLabel([rockets]));
    // One line, without lone surrogates (which the library refuses); the hostname is cut too.
    assert.equal(holdLabel(["a\u2028b\u2029c", "\uD83D"], "web\n1"), `host=web 1 pid=${process.pid} cmd=a b c \uFFFD`);
    assert.equal(holdLabel(["x"], "h".repeat(300)), `host=${"h".repeat(63)}… pid=${process.pid} cmd=x`);

    // The run takes its lease and runs the command.
    const name = unique("emoji");
    const r = await cli(["run", name, "--", ...child("env", "0", rockets)]);
    assert.equal(r.code, 0, r.stderr);
    const env = JSON.parse(r.stdout);
    assert.ok(env.owner.endsWith("🚀…"), env.owner);
    assert.ok(env.owner.length <= 33 + 256, `${env.owner.length}`);
  });

  test(
    "text read from Redis is shown escaped, one line each: inspect's table, observe's lines, the status line",
    T,
    async () => {
      const base = unique("ctl");
      const evil = "ops\nrm -rf / \x1b[2J\x1b[H";
      const a = await acquire(admin, `${base}:a`, { owner: evil });
      const b = await acquire(admin, `${base}:b\r\x1b[31m`, { label: "web\u202e1\u2028x" });
      const leader = await campaign(admin, `${base}:e`, { value: "v\n\x1b]0;title\x07", label: "sched\u200b" });
      try {
        const [table, json, observed] = await Promise.all([
          cli(["inspect", `${base}:[ab]*`]),
          cli(["inspect", `${base}:[ab]*`, "--json"]),
          cli(["observe", `${base}:e`, "--count", "1"]),
        ]);
        assert.equal(table.code, 0, table.stderr);
        const rows = table.stdout.trimEnd().split("\n");
        assert.equal(rows.length, 4, table.stdout); // the server line, the header, a row per lease
        assert.doesNotMatch(
          table.stdout.replaceAll("\n", ""),
          /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u,
          JSON.stringify(table.stdout),
        );
        const scope = a.owner.slice(0, a.owner.indexOf(":"));
        assert.match(
          rows[2],
          new RegExp(`^${base}:a +exclusive +${scope}:ops\\\\nrm -rf / \\\\u001b\\[2J\\\\u001b\\[H +1 `),
        );
        assert.match(rows[3], new RegExp(`^${base}:b\\\\r\\\\u001b\\[31m +exclusive .* web\\\\u202e1\\\\u2028x$`));
        // --json has the exact strings.
        const list = JSON.parse(json.stdout);
        assert.deepEqual(list.map((l: { name: string }) => l.name), [`${base}:a`, `${base}:b\r\x1b[31m`]);
        assert.equal(list[0].owners[0].owner, a.owner);
        assert.equal(list[1].owners[0].label, "web\u202e1\u2028x");

        assert.equal(observed.code, 0, observed.stderr);
        const id = leader.owner.slice(0, leader.owner.indexOf(" "));
        assert.equal(
          observed.stdout.split("\n")[1],
          `term ${leader.fence}: sched\\u200b (${id}) = v\\n\\u001b]0;title\\u0007`,
          JSON.stringify(observed.stdout),
        );
        assert.equal(observed.stdout.split("\n").length, 3, JSON.stringify(observed.stdout));

        // The status line of a run waiting for either lease.
        for (const lease of [a, b]) {
          const line = statusText(lease.name, 1_500, await inspect(admin, lease.name), 1);
          assert.doesNotMatch(line, /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u, JSON.stringify(line));
        }
        assert.match(
          statusText(a.name, 1_500, await inspect(admin, a.name), 1),
          /held by .*:ops\\nrm -rf \/ \\u001b\[2J/,
        );
      } finally {
        await Promise.all([release(a), release(b), release(leader)]);
      }
    },
  );

  test("printable() escapes controls, format characters and separators JSON-style, and keeps the rest", () => {
    assert.equal(
      printable("a\nb\tc\x1b[2J\x7f\u0085\u202e\u200b\u2028\u2029\u{E0001}\uD800 é 東京 🚀 \\n"),
      "a\\nb\\tc\\u001b[2J\\u007f\\u0085\\u202e\\u200b\\u2028\\u2029\\udb40\\udc01\\ud800 é 東京 🚀 \\n",
    );
    assert.equal(printable("host=web-1 pid=7 cmd=./job.sh"), "host=web-1 pid=7 cmd=./job.sh");
    assert.equal(displayWidth("ab東京🚀é"), 2 + 4 + 2 + 1);
  });

  test("the status line says when the lease is in a lock delay, not free", () => {
    const gone = {
      owner: "abc",
      label: undefined,
      holds: 1,
      kind: "exclusive",
      remainingMs: 3_000,
      lockDelayMs: 5_000,
    };
    const info = {
      name: "ftp",
      held: false,
      kind: "exclusive",
      permits: undefined,
      owners: [],
      remainingMs: 0,
      fence: 1,
      waiters: 1,
      delayed: [gone],
      delayMs: 3_000,
    } as unknown as Parameters<typeof statusText>[2];
    const line = statusText("ftp", 1_500, info, 1);
    assert.doesNotMatch(line, /free/, line);
    assert.match(line, /lock delay for 3(\.0)?s more/, line);
  });

  test("the status line is cut to the terminal's width in columns (CJK and emoji take two)", () => {
    const wide = "夜間レポートを生成する東京ホスト🚀🚀🚀".repeat(4);
    const info = {
      name: "夜間レポート",
      held: true,
      kind: "exclusive",
      permits: undefined,
      owners: [{ owner: `abc ${wide}`, label: wide, holds: 1, kind: "exclusive", remainingMs: 20_000 }],
      remainingMs: 20_000,
      fence: 1,
      waiters: 1,
    } as unknown as Parameters<typeof statusText>[2];
    for (const width of [40, 80, 81, 200]) {
      const line = fit(statusText("夜間レポート", 1_500, info, 1), width);
      assert.ok(columns(line) <= width - 1, `${columns(line)} columns on a ${width}-column terminal: ${line}`);
      assert.ok(line.endsWith("…"), line);
    }
    // Plain text: as many characters as fit, then "…", one column short of the edge.
    assert.equal(fit("x".repeat(200), 80), `${"x".repeat(78)}…`);
    assert.equal(fit("short", 80), "short");
  });

  test(
    "the status line's place in queue is this waiter's, even when another waiter has the same label",
    T,
    async () => {
      const name = unique("place");
      const label = "host=worker pid=1 cmd=./job.sh"; // two containers: same hostname, both CLIs PID 1
      const blocker = await acquire(admin, name);
      const [c1, c2] = await Promise.all([srv.client(), srv.client()]);
      const first = acquire(c1, name, { label, waitMs: 30_000 });
      for (let i = 0; i < 200 && (await inspect(admin, name)).waiters < 1; i++) await sleep(25);
      const second = acquire(c2, name, { label, waitMs: 30_000 });
      for (let i = 0; i < 200 && (await inspect(admin, name)).waiters < 2; i++) await sleep(25);
      try {
        // Each waiter's line in turn (one capture of stderr at a time).
        const lines: string[] = [];
        for (const c of [c1, c2]) {
          const writes = await capturingStderr(async (writes) => {
            const status = startStatus(c, { name, prefix: "redlease", start: performance.now() });
            try {
              for (let i = 0; i < 100 && !writes.some((w) => w.includes("in queue")); i++) await sleep(50);
            } finally {
              await status.stop();
            }
          });
          lines.push(writes.find((w) => w.includes("in queue")) ?? "");
        }
        assert.match(lines[0], /· 1st of 2 in queue ·/, lines[0]);
        assert.match(lines[1], /· 2nd of 2 in queue ·/, lines[1]);
      } finally {
        await release(blocker);
        await release(await first);
        await release(await second);
      }
    },
  );

  test(
    "a waiting run shows a status line on a terminal (elapsed, place in queue, holder by label) and clears it; none on a pipe",
    { ...T, skip: SCRIPT ? false : "needs Linux and script(1) (util-linux) for a pseudo-terminal" },
    async () => {
      const name = unique("status");
      const blocker = await acquire(admin, name, { label: "blocker job" });
      const [cmd, pre] = runtimeArgsOf(CLI);
      const cliLine = [cmd, ...pre, "run", name, "--wait", "30s", "--", ...child("env", "0")].map(shellQuote);
      // On a pseudo-terminal: stdout and stderr are both the terminal, which script(1) copies to its stdout.
      const tty = startCli([], {
        // A terminal 200 columns wide: the line is cut to the width (as on a narrow one), and the test reads it whole.
        argv0: [SCRIPT!, ["-qfec", `stty cols 200; ${cliLine.join(" ")}`, "/dev/null"]],
        stdin: "pipe",
        env: { SHELL: "/bin/sh" },
      });
      let piped: Running | undefined;
      let forced: Running | undefined;
      try {
        await tty.waitFor(
          new RegExp(
            `${CLEAR}redlease: waiting \\d+\\.\\ds for '${name}' · 1st of 1 in queue · held by blocker job \\(exclusive, [\\d.]+s left\\)`,
          ),
        );
        // Two more runs queue behind it with stderr on a pipe: one plain, one with the line forced on.
        piped = startCli(["run", name, "--wait", "30s", "--", ...child("env", "0")]);
        for (let i = 0; i < 200 && (await inspect(admin, name)).waiters < 2; i++) await sleep(25);
        forced = startCli(["run", name, "--wait", "30s", "--", ...child("env", "0")], {
          env: { REDLEASE_STATUS: "1" },
        });
        for (let i = 0; i < 200 && (await inspect(admin, name)).waiters < 3; i++) await sleep(25);
        await tty.waitFor(/· 1st of 3 in queue ·/);
        await sleep(1_200); // the forced one draws its line too
        await release(blocker);
        const [t, p, f] = await Promise.all([tty.done, piped.done, forced.done]);
        for (const r of [t, p, f]) assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
        // On the terminal: the last line drawn is cleared before the command's output.
        const out = t.stdout;
        const last = out.lastIndexOf("redlease: waiting");
        const json = out.indexOf("{", last);
        assert.ok(last >= 0 && json > last, out);
        assert.ok(out.slice(last, json).includes("\r\x1b[2K"), `not cleared: ${JSON.stringify(out.slice(last, json))}`);
        assert.doesNotMatch(out.slice(json), /redlease: waiting/);
        assert.equal(out.split("\n").filter((l) => l.includes("redlease: waiting")).length, 1, "one line, redrawn");
        const env = JSON.parse(out.slice(json, out.indexOf("}", json) + 1));
        assert.match(env.owner, new RegExp(`^[\\w-]+ host=${hostname()} pid=\\d+ cmd=\\S+`));
        // On a pipe: nothing at all, unless forced.
        assert.equal(p.stderr, "");
        assert.match(
          f.stderr,
          new RegExp(`^${CLEAR}redlease: waiting \\d+\\.\\ds for '[^']+' · (2nd|3rd) of \\d in queue ·`),
        );
        assert.ok(f.stderr.endsWith("\r\x1b[2K"), JSON.stringify(f.stderr.slice(-40)));
        assert.match(f.stdout, /^\{/);
      } finally {
        tty.proc.stdin!.end();
        for (const r of [piped, forced]) if (r) r.proc.kill("SIGTERM");
        await release(blocker).catch(() => {});
      }
    },
  );

  test(
    "unlock --force removes a held lease (its holder loses it); exit 1 when not held, 2 without --force",
    T,
    async () => {
      const name = unique("unlock");
      const lease = await acquire(admin, name, { watchdogMs: 600 });
      const refused = await cli(["unlock", name]);
      assert.equal(refused.code, 2);
      oneLine(refused, /without --force/);
      assert.equal((await inspect(admin, name)).held, true, "nothing done without --force");

      const r = await cli(["unlock", name, "--force"]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `unlocked '${name}'\n`);
      assert.equal((await inspect(admin, name)).held, false);
      const reason = lease.signal.aborted
        ? lease.signal.reason
        : await new Promise((resolve) =>
          lease.signal.addEventListener("abort", () => resolve(lease.signal.reason), { once: true })
        );
      assert.ok(reason instanceof LeaseLostError && reason.why === "not-held", String(reason));

      const again = await cli(["unlock", name, "--force"]);
      assert.equal(again.code, 1);
      oneLine(again, new RegExp(`lease '${name}' was not held`));
    },
  );

  test("run from source without node-redis installed, the CLI says so in one line (exit 5)", T, async () => {
    // A copy of the CLI and the library where no node_modules can be found.
    const copy = mkdtempSync(join(tmpdir(), "redlease-noredis-"));
    try {
      for (const p of ["cli", "src", "mod.ts"]) cpSync(join(root, p), join(copy, p), { recursive: true });
      writeFileSync(join(copy, "package.json"), '{ "type": "module", "version": "0.0.0" }\n');
      const [cmd, pre] = runtimeArgs(join(copy, "cli", "redlease.ts"));
      // On Node the tsx loader is given by absolute URL, since it cannot be resolved from the copy either; Bun
      // is told not to auto-install the missing package.
      const argv0: [string, string[]] = runtimeName() === "node"
        ? [cmd, [
          "--import",
          pathToFileURL(join(root, "node_modules", "tsx", "dist", "loader.mjs")).href,
          ...pre.slice(2),
        ]]
        : runtimeName() === "bun"
        ? [cmd, ["--no-install", ...pre]]
        : [cmd, pre];
      const r = await cli(["inspect"], { cwd: copy, argv0 });
      assert.equal(r.code, 5, r.stderr);
      oneLine(r, /^redlease: redlease CLI from source needs node-redis: npm install redis$/);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  test("an unknown or missing command: the message lists every command", T, async () => {
    const runs = await Promise.all([cli(["frobnicate"]), cli([]), cli(["help", "frobnicate"])]);
    for (const r of runs) {
      assert.equal(r.code, 2, r.stderr);
      oneLine(r, /expected one of run, elect, observe, watch, inspect, unlock, help \(see 'redlease --help'\)/);
    }
  });

  test("a Redis that accepts the connection but never answers (paused): exit 5 in one line, no hang", T, async () => {
    const own = await startRedis();
    try {
      own.pause(); // the kernel still accepts the TCP connection; the handshake gets no answer
      try {
        const runs = await Promise.all([
          cli(["inspect", "--url", own.url], { timeoutMs: 20_000 }),
          cli(["unlock", "--force", "x", "--url", own.url], { timeoutMs: 20_000 }),
          cli(["observe", "x", "--url", own.url], { timeoutMs: 20_000 }),
          cli(["run", "x", "--url", own.url, "--", "true"], { timeoutMs: 20_000 }),
        ]);
        for (const r of runs) {
          assert.equal(r.killed, false, `still running after 20 s: ${r.stderr}`);
          assert.equal(r.code, 5, r.stderr);
          oneLine(r, /^redlease: cannot connect to Redis at redis:\/\/127\.0\.0\.1:\d+: no answer within 5 s$/);
        }
      } finally {
        own.resume();
      }
    } finally {
      await own.stop();
    }
  });

  test("an outage while waiting is exit 5 (Redis unavailable), never 3 (busy)", T, async () => {
    const own = await startRedis();
    try {
      const holder = await own.client();
      const name = unique("outage");
      await acquire(holder, name, { leaseMs: 60_000 });
      const run = startCli(["run", name, "--url", own.url, "--wait", "3s", "--", "true"]);
      for (let i = 0; i < 400 && (await inspect(holder, name)).waiters === 0; i++) await sleep(50);
      assert.equal((await inspect(holder, name)).waiters, 1, "the CLI is queued: Redis answered 'held'");
      own.pause(); // Redis stops answering before the wait runs out
      let r: Result;
      try {
        r = await run.done;
      } finally {
        own.resume();
      }
      assert.equal(r.code, 5, r.stderr);
      oneLine(r, /^redlease: Redis did not answer within \d+ ms about lease/);
      // The exit codes in --help say so.
      assert.match((await cli(["--help"])).stdout, /\n {2}5 +Redis unavailable/);
    } finally {
      await own.stop();
    }
  });

  test(
    "ACL credentials from the URL or REDIS_USERNAME / REDIS_PASSWORD, never printed; rediss:// is TLS",
    T,
    async () => {
      const own = await startRedis();
      try {
        const admin = await own.client();
        await admin.sendCommand(["ACL", "SETUSER", "alice", "on", ">s3cret-pw", "~*", "&*", "+@all"]);
        await admin.sendCommand(["ACL", "SETUSER", "default", "off"]); // new connections must authenticate
        const hostPort = own.url.replace(/^redis:\/\//, "");
        const asAlice = `redis://alice:s3cret-pw@${hostPort}`;
        const noEnv = { REDIS_USERNAME: undefined, REDIS_PASSWORD: undefined };
        const byUrl = await cli(["inspect", "--url", asAlice], { env: noEnv });
        assert.equal(byUrl.code, 0, byUrl.stderr);
        assert.doesNotMatch(byUrl.stdout + byUrl.stderr, /s3cret/);
        const byEnv = await cli(["inspect"], {
          env: { REDIS_URL: own.url, REDIS_USERNAME: "alice", REDIS_PASSWORD: "s3cret-pw" },
        });
        assert.equal(byEnv.code, 0, byEnv.stderr);
        const none = await cli(["inspect"], { env: { ...noEnv, REDIS_URL: own.url } });
        assert.equal(none.code, 5, "the default user is off: without credentials, no access");
        const failures: Array<[string[], Record<string, string | undefined>, number, string]> = [
          [["inspect", "--url", `redis://alice:wrong-pw-1@${hostPort}`], noEnv, 5, "wrong-pw-1"],
          [["inspect"], { REDIS_URL: own.url, REDIS_USERNAME: "alice", REDIS_PASSWORD: "wrong-pw-2" }, 5, "wrong-pw-2"],
          // A URL that does not parse (a bad port) is a usage error that still hides its password.
          [["inspect", "--url", "redis://alice:wrong-pw-3@127.0.0.1:99999"], noEnv, 2, "wrong-pw-3"],
          // rediss:// speaks TLS: to this plain server the handshake fails.
          [["inspect", "--url", `rediss://alice:wrong-pw-4@${hostPort}`], noEnv, 5, "wrong-pw-4"],
          // A bad URL whose password has an unescaped '@': all of it hidden, not only what comes before that '@'.
          [["inspect", "--url", "redis://alice:wrong@pw-5@127.0.0.1:99999"], noEnv, 2, "pw-5"],
        ];
        const results = await Promise.all(failures.map(([args, env]) => cli(args, { env })));
        results.forEach((r, i) => {
          const [args, , code, secret] = failures[i];
          assert.equal(r.code, code, `${args.join(" ")}: ${r.stderr}`);
          oneLine(r, /./);
          assert.ok(!(r.stdout + r.stderr).includes(secret), `${args.join(" ")} printed its password: ${r.stderr}`);
        });
        assert.match(results[0].stderr, /redis:\/\/alice:\*\*\*@/);
        assert.match(results[2].stderr, /alice:\*\*\*@127\.0\.0\.1:99999/);
        assert.match(results[3].stderr, /cannot connect to Redis at rediss:\/\/alice:\*\*\*@/);
        assert.match(results[4].stderr, /'redis:\/\/alice:\*\*\*@127\.0\.0\.1:99999'/);
      } finally {
        await own.stop();
      }
    },
  );
});
