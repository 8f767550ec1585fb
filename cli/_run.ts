// `redlease run NAME [options] [--] CMD ARGS…`: hold a lease while a command runs.
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { constants, hostname } from "node:os";
import process from "node:process";
import {
  acquire,
  campaign,
  type Lease,
  LeaseKindError,
  LeaseLostError,
  LockTimeoutError,
  release,
  resume,
} from "../mod.ts";
import { MAX_LABEL } from "../src/_validate.ts";
import { flag, formatMs, GLOBAL_OPTIONS, type OptionSpec, parseArgs, parseDuration, value } from "./_args.ts";
import {
  checkName,
  checkPrefix,
  CliError,
  describeError,
  EXIT,
  EXIT_CODES_HELP,
  say,
  timed,
  usage,
  write,
} from "./_common.ts";
import { close, connect, type RedisClient, resolveUrl, serverOf } from "./_connect.ts";
import { startStatus, statusWanted } from "./_status.ts";
import { cutToCodePoints, cutToUnits } from "./_text.ts";

export const RUN_HELP = `Usage: redlease run NAME [options] [--] CMD [ARGS…]

Acquire the lease NAME, run CMD while holding it, release it when CMD exits, and exit with CMD's code.
The lease is renewed while CMD runs (watchdog mode: its TTL is --lease, renewed every third of it), so a
crashed host frees it within --lease. CMD gets these environment variables:
  REDLEASE_NAME    the lease name (REDLEASE_PREFIX its key prefix, REDLEASE_SERVER its Redis, without credentials)
  REDLEASE_FENCE   the fencing token: pass it to the resource you protect, which rejects lower tokens
  REDLEASE_TOKEN   this hold, for another process to take over (resume() in the library)
  REDLEASE_OWNER   the owner of this hold: its id, a space and its label (host=… pid=… cmd=…)
While it waits for the lease on a terminal, redlease keeps one status line on stderr, refreshed every 0.5s:
how long it has waited, who holds the lease (by label: 'redlease inspect' shows the same) and its place in
the queue; the line is cleared once the lease is taken or the wait ends. Not on a pipe or file, so a
script's stderr only ever gets the one-line errors (REDLEASE_STATUS=1 forces the line on, =0 off).
A redlease run inside CMD for the same lease (same NAME, --prefix and Redis) finds REDLEASE_TOKEN and runs
under this hold instead of waiting for it: it renews the hold while its command runs (whatever its --fixed)
and leaves the release to this run.
SIGINT, SIGTERM and SIGHUP sent to redlease are forwarded to CMD. A Ctrl-C at a terminal is the exception:
the terminal sends SIGINT to its whole foreground process group, CMD included, so redlease does not send it
a second one. On Linux redlease tells this case by process group: while redlease and CMD are the terminal's
foreground group, SIGINT is not forwarded, even if sent to redlease alone (send SIGTERM, or kill -INT -PGID).
Elsewhere every SIGINT is forwarded, so CMD may get two for one Ctrl-C. If the lease is lost (expired,
force-unlocked, or Redis unreachable until its deadline), CMD gets SIGTERM, then SIGKILL after --grace,
and redlease exits with code 4 and one line on stderr. A watchdog lease is found lost at the latest one
renewal (a third of --lease) after Redis dropped it. Signals go to CMD's own process, not to processes it
starts: in a shell wrapper, exec the real program (sh -c 'setup; exec prog').

Options go before CMD: everything from CMD on (or after --) is passed to it unchanged.

Options:
  --lease DURATION  lease TTL; renewed every third of it while CMD runs (default 30s, at least 30ms)
  --fixed           no renewal: the lease ends after --lease, and CMD is stopped then (like timeout(1))
  --wait DURATION   how long to wait while another owner holds the lease (default 10s; 0 = fail at once
                    with exit code 3; inf = wait forever)
  --grace DURATION  time between SIGTERM and SIGKILL after the lease is lost (default 10s)
  --shared          hold it shared (the read side of a read-write lock): shared runs run together, and an
                    exclusive run (the default) waits for them and excludes them
  --permits N       hold one of N permits: at most N runs hold the lease at once (every run of NAME must
                    say the same N; exit code 3 otherwise)
  --url URL         Redis URL (default: $REDIS_URL, else redis://localhost:6379)
  --prefix PREFIX   key prefix (default: redlease)
  -h, --help        show this help

Durations: 500ms, 30s, 1.5s, 2m, 1h, combined as 1m30s, or 0.

Examples:
  redlease run nightly-report -- ./report.sh --date today
  redlease run --wait 0 cron:cleanup -- node cleanup.js        # skip this run if another host is on it
  redlease run --lease 5m --fixed migrate -- npm run migrate    # stop the migration after 5 minutes
  redlease run --permits 4 upstream:geo -- ./fetch.sh           # at most 4 of these at once, on any host
  redlease run --shared schema -- ./read-report.sh              # many readers; \`redlease run schema\` excludes them

${EXIT_CODES_HELP}
`;

export const ELECT_HELP = `Usage: redlease elect NAME [options] [--] CMD [ARGS…]

Campaign in the election NAME, and once elected run CMD while leading: a singleton (a scheduler, a
compactor) that runs on one host at a time, with another host taking over when it stops. Candidates wait
first come, first served (by default forever: --wait inf); when the leader's CMD exits (it resigns) or its
host dies (its lease's TTL, --lease), the next candidate is elected. CMD gets the variables of
'redlease run'; REDLEASE_FENCE is the term, strictly greater than every earlier term: pass it with every
write so that a deposed leader's late writes are rejected. Observers ('redlease observe NAME', observe() in
the library) see every change. Loss of the leadership stops CMD as 'run' stops it (exit code 4).

Options:
  --lease DURATION  leadership TTL, renewed every third of it while CMD runs (default 8s: a dead leader
                    is replaced within 8s; campaign()'s default)
  --fixed           no renewal: the leadership ends after --lease, and CMD is stopped then
  --wait DURATION   how long to campaign (default inf; 0 = only if nobody leads, else exit code 3)
  --grace DURATION  time between SIGTERM and SIGKILL after the leadership is lost (default 10s)
  --url URL         Redis URL (default: $REDIS_URL, else redis://localhost:6379)
  --prefix PREFIX   key prefix (default: redlease)
  -h, --help        show this help

Example:
  redlease elect scheduler -- node scheduler.js     # on every host; one runs it at a time

${EXIT_CODES_HELP}
`;

const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
type Forwarded = typeof FORWARDED[number];

const FALLBACK_SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };

function signalNumber(sig: string): number {
  const n = (constants?.signals as Record<string, number> | undefined)?.[sig] ?? FALLBACK_SIGNALS[sig];
  return typeof n === "number" ? n : 0;
}

/**
 * Send `sig` to the command. process.kill rather than child.kill: Deno's child.kill() makes the child's exit
 * report the signal sent even when the command trapped it and exited with its own code.
 */
function signalChild(child: ChildProcess, sig: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(child.pid, sig);
  } catch { /* already gone */ }
}

interface DenoPermissions {
  permissions?: { querySync?(d: { name: "read"; path: string }): { state: string } };
}

/** The process group (field 5) and its terminal's foreground process group (field 8) of /proc/PID/stat. */
function processGroups(pid: number): { pgrp: number; tpgid: number } | undefined {
  if (process.platform !== "linux") return undefined;
  // Deno without read access to /proc would prompt for it (on a terminal) or throw: ask first, quietly.
  const deno = (globalThis as { Deno?: DenoPermissions }).Deno;
  if (deno && deno.permissions?.querySync?.({ name: "read", path: "/proc" }).state !== "granted") return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 2 is the command name in parentheses, which may hold spaces and ')': count from the last ')'.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // f[0] is field 3
    const pgrp = Number(f[2]);
    const tpgid = Number(f[5]);
    return Number.isInteger(pgrp) && Number.isInteger(tpgid) ? { pgrp, tpgid } : undefined;
  } catch {
    return undefined; // no /proc, or the process is gone
  }
}

/**
 * Whether the terminal already sent the command the SIGINT that redlease got, so forwarding it would make one
 * Ctrl-C two SIGINTs (and to many programs a second Ctrl-C means "force quit").
 *
 * Why by process group: a Ctrl-C makes the terminal signal every process of its foreground process group, and
 * the command is spawned in redlease's group. JavaScript cannot see who sent a signal (no siginfo), so: when
 * redlease's group is the terminal's foreground group and the command is still in it (it did not move to a
 * group of its own), the SIGINT most likely came from the terminal and reached the command too. kill(1) aimed
 * at redlease alone then is rare, and has workarounds (SIGTERM, or kill -INT -PGID). The command is not given a
 * group of its own instead: it would then be a background job, stopped when it reads the terminal, and out of
 * reach of Ctrl-Z and SIGWINCH. Not Linux, or /proc unreadable: false, and every SIGINT is forwarded.
 */
function terminalSignalledCommand(childPid: number): boolean {
  const self = processGroups(process.pid);
  if (self === undefined || self.tpgid <= 0 || self.pgrp !== self.tpgid) return false;
  return processGroups(childPid)?.pgrp === self.pgrp;
}

/** Why a lease was lost, for the one line on stderr. */
function lossText(err: LeaseLostError, leaseMs: number): string {
  if (err.why === "expired") return `its fixed lease of ${formatMs(leaseMs)} ran out`;
  if (err.why === "not-held") return "Redis reports it is no longer held by this owner (expired or force-unlocked)";
  const cause = err.cause === undefined ? "" : `: ${describeError(err.cause)}`;
  return `renewals failed until its deadline passed (Redis unreachable${cause})`;
}

/** Thrown into the acquire signal when redlease itself is interrupted while waiting. */
class Interrupted extends Error {
  constructor(readonly signal: Forwarded) {
    super(`interrupted by ${signal}`);
  }
}

interface ChildResult {
  readonly code: number | null;
  readonly signal: string | null;
  readonly error?: Error;
}

export function run(argv: readonly string[]): Promise<number> {
  return runUnder("run", argv);
}

/** `redlease elect NAME -- CMD`: run CMD while leading the election NAME (campaigning until elected). */
export function elect(argv: readonly string[]): Promise<number> {
  return runUnder("elect", argv);
}

/** The longest command shown in a hold's label, in code points. */
const LABEL_CMD_CHARS = 120;
/** The longest hostname shown in a hold's label, in UTF-16 code units (a Linux hostname has at most 64 bytes). */
const LABEL_HOST_UNITS = 64;

/**
 * The label of a hold by this process: `host=… pid=… cmd=…`, on one line (control characters and line separators
 * as spaces, lone surrogates as U+FFFD, which the library refuses), the host cut to LABEL_HOST_UNITS and the
 * command to LABEL_CMD_CHARS code points, then to what is left of the library's MAX_LABEL: whole code points, but
 * counted in UTF-16 code units as the library counts (String#length: an emoji counts 2).
 */
export function holdLabel(command: readonly string[], host = hostName()): string {
  const clean = (s: string) => s.replace(/[\p{Cc}\p{Zl}\p{Zp}]/gu, " ").replace(/\p{Cs}/gu, "\uFFFD");
  const head = `host=${cutToUnits(clean(host), LABEL_HOST_UNITS)} pid=${process.pid} cmd=`;
  const cmd = cutToCodePoints(clean(command.join(" ")), LABEL_CMD_CHARS);
  return head + cutToUnits(cmd, MAX_LABEL - head.length);
}

function hostName(): string {
  try {
    return hostname();
  } catch {
    return "?"; // Deno without --allow-sys
  }
}

async function runUnder(cmd: "run" | "elect", argv: readonly string[]): Promise<number> {
  const kinds: OptionSpec = cmd === "run" ? { shared: "flag", permits: "value" } : {};
  const p = parseArgs(
    cmd,
    argv,
    { ...GLOBAL_OPTIONS, lease: "value", fixed: "flag", wait: "value", grace: "value", ...kinds },
    1,
  );
  if (flag(p, "help")) {
    await write("stdout", cmd === "run" ? RUN_HELP : ELECT_HELP);
    return EXIT.OK;
  }
  const name = checkName(cmd, p.positionals[0]);
  if (p.command.length === 0) throw usage(cmd, `missing the command to run: redlease ${cmd} NAME -- CMD [ARGS…]`);
  const fixed = flag(p, "fixed");
  const leaseMs = parseDuration(cmd, "lease", value(p, "lease") ?? (cmd === "run" ? "30s" : "8s"), {
    min: fixed ? 1 : 30,
  });
  const waitMs = parseDuration(cmd, "wait", value(p, "wait") ?? (cmd === "run" ? "10s" : "inf"), {
    min: 0,
    infinite: true,
  });
  const graceMs = parseDuration(cmd, "grace", value(p, "grace") ?? "10s", { min: 0 });
  const prefix = checkPrefix(cmd, value(p, "prefix"));
  const url = resolveUrl(cmd, value(p, "url"));
  const shared = flag(p, "shared");
  const permitsText = value(p, "permits");
  let permits: number | undefined;
  if (permitsText !== undefined) {
    permits = Number(permitsText);
    if (!/^[1-9]\d*$/.test(permitsText) || permits > 1_000_000) {
      throw usage("run", `--permits must be an integer from 1 to 1000000, not '${permitsText}'`);
    }
    if (shared) throw usage("run", "--permits cannot be combined with --shared");
  }

  // Signals: while waiting they cancel the wait; once the command runs they are forwarded to it, except a
  // SIGINT the terminal sent the command as well (terminalSignalledCommand).
  let child: ChildProcess | undefined;
  let exited = false;
  const waiting = new AbortController();
  const onSignal = (sig: Forwarded) => {
    if (child) {
      if (exited || child.pid === undefined) return;
      if (sig === "SIGINT" && terminalSignalledCommand(child.pid)) return;
      signalChild(child, sig);
    } else if (!waiting.signal.aborted) {
      waiting.abort(new Interrupted(sig));
    }
  };
  const handlers = FORWARDED.map((sig) => [sig, () => onSignal(sig)] as const);
  for (const [sig, fn] of handlers) {
    try {
      process.on(sig, fn);
    } catch { /* signal not supported on this platform */ }
  }

  let client: RedisClient | undefined;
  try {
    client = await connect(url);
    if (waiting.signal.aborted) return 128 + signalNumber((waiting.signal.reason as Interrupted).signal);
    // Inside a run of the same lease (same name, prefix and Redis): run under that hold, resumed: renewed here too
    // (in watchdog mode whatever --fixed says: the hold is the enclosing run's), and released by that run.
    const env = process.env;
    const token = env.REDLEASE_NAME === name && env.REDLEASE_PREFIX === prefix && env.REDLEASE_SERVER === serverOf(url)
      ? env.REDLEASE_TOKEN
      : undefined;
    // The holder, as `redlease inspect` and other runs' status lines show it (a nested run keeps the enclosing one's).
    const label = token === undefined ? holdLabel(p.command) : undefined;
    const status = statusWanted() ? startStatus(client, { name, prefix, start: performance.now() }) : undefined;
    let lease: Lease;
    try {
      lease = token !== undefined
        ? await resume(client, token, { watchdogMs: Math.max(30, leaseMs), signal: waiting.signal })
        : cmd === "elect"
        ? await campaign(client, name, {
          ...(fixed ? { leaseMs } : { watchdogMs: leaseMs }),
          waitMs,
          signal: waiting.signal,
          prefix,
          label,
        })
        : await acquire(client, name, {
          ...(fixed ? { leaseMs } : { watchdogMs: leaseMs }),
          waitMs,
          signal: waiting.signal,
          prefix,
          label,
          ...(shared ? { shared } : {}),
          ...(permits !== undefined ? { permits } : {}),
        });
    } catch (e) {
      await status?.stop();
      if (e instanceof Interrupted) return 128 + signalNumber(e.signal);
      if (e instanceof LeaseLostError) {
        throw new CliError(
          `lost lease '${name}': the enclosing run no longer holds it (${lossText(e, leaseMs)})`,
          EXIT.LOST,
        );
      }
      if (e instanceof LeaseKindError) throw new CliError(e.message, EXIT.BUSY);
      if (e instanceof LockTimeoutError) {
        const left = e.remainingMs >= 0 ? ` for ${formatMs(e.remainingMs)} more` : "";
        const waited = waitMs === 0 ? "--wait 0" : `waited ${formatMs(e.waitedMs)}`;
        throw new CliError(`lease '${name}' is busy: another owner holds it${left} (${waited})`, EXIT.BUSY);
      }
      throw e;
    }
    await status?.stop();
    if (waiting.signal.aborted) {
      // Interrupted just as the lease was granted: give it back without starting the command.
      if (token === undefined) await timed(release(lease), "release the lease").catch(() => {});
      return 128 + signalNumber((waiting.signal.reason as Interrupted).signal);
    }
    const settings = { name, prefix, server: serverOf(url), leaseMs, graceMs, nested: token !== undefined };
    return await supervise(lease, p.command, settings, (c) => (child = c), () => {
      exited = true;
    });
  } finally {
    for (const [sig, fn] of handlers) {
      try {
        process.off(sig, fn);
      } catch { /* not supported */ }
    }
    await close(client);
  }
}

interface Settings {
  readonly name: string;
  readonly prefix: string;
  /** serverOf() the URL: which Redis (no credentials). */
  readonly server: string;
  readonly leaseMs: number;
  readonly graceMs: number;
  /** Running under an enclosing run's hold (resumed from REDLEASE_TOKEN): that run releases it, not this one. */
  readonly nested: boolean;
}

/** Start the command; a spawn failure is reported through the result, never thrown. */
function start(
  command: readonly string[],
  env: Record<string, string | undefined>,
): [ChildProcess | undefined, Promise<ChildResult>] {
  let child: ChildProcess;
  try {
    child = spawn(command[0], command.slice(1), { stdio: "inherit", env });
  } catch (error) {
    return [undefined, Promise.resolve({ code: null, signal: null, error: error as Error })];
  }
  const result = new Promise<ChildResult>((resolve) => {
    // 'error' also reports a failed kill(); only a spawn failure (no pid) ends the wait.
    child.on("error", (error) => {
      if (child.pid === undefined) resolve({ code: null, signal: null, error });
    });
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  return [child, result];
}

/** Run the command under the held lease; returns the exit code. */
async function supervise(
  lease: Lease,
  command: readonly string[],
  s: Settings,
  started: (child: ChildProcess) => void,
  ended: () => void,
): Promise<number> {
  if (lease.signal.aborted) {
    // Lost between the grant and here: do not start the command at all.
    const why = lease.signal.reason instanceof LeaseLostError ? lossText(lease.signal.reason, s.leaseMs) : "released";
    throw new CliError(`lost lease '${s.name}' before starting the command: ${why}`, EXIT.LOST);
  }
  const [child, result] = start(command, {
    ...process.env,
    REDLEASE_NAME: s.name,
    REDLEASE_PREFIX: s.prefix,
    REDLEASE_SERVER: s.server,
    REDLEASE_FENCE: String(lease.fence),
    REDLEASE_TOKEN: lease.token,
    REDLEASE_OWNER: lease.owner,
  });
  if (child) started(child);

  let lost: LeaseLostError | undefined;
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  let done = false;
  const onAbort = () => {
    const reason = lease.signal.reason;
    if (done || !(reason instanceof LeaseLostError) || !child) return;
    lost = reason;
    void say(
      `lost lease '${s.name}': ${lossText(reason, s.leaseMs)}; sent SIGTERM to the command` +
        (s.graceMs > 0 ? ` (SIGKILL in ${formatMs(s.graceMs)})` : ""),
    );
    signalChild(child, s.graceMs > 0 ? "SIGTERM" : "SIGKILL");
    if (s.graceMs > 0) {
      killTimer = setTimeout(() => {
        if (done) return;
        void say(`the command was still running ${formatMs(s.graceMs)} after SIGTERM: sent SIGKILL`);
        signalChild(child, "SIGKILL");
      }, s.graceMs);
    }
  };
  lease.signal.addEventListener("abort", onAbort, { once: true });

  const r = await result;
  done = true;
  ended();
  clearTimeout(killTimer);
  lease.signal.removeEventListener("abort", onAbort);

  // Nested: the enclosing run holds the lease and releases it; this run only stops renewing it (by exiting).
  const releaseIt = () => s.nested ? Promise.resolve(!lease.signal.aborted) : release(lease);
  if (r.error) {
    await timed(releaseIt(), "release the lease").catch(() => {});
    const code = (r.error as { code?: string }).code;
    if (code === "ENOENT") throw new CliError(`cannot run '${command[0]}': command not found`, EXIT.NOT_FOUND);
    throw new CliError(`cannot run '${command[0]}': ${describeError(r.error)}`, EXIT.CANNOT_EXECUTE);
  }
  if (lost) {
    // The hold is gone already; the release only clears local state (and is false).
    await timed(releaseIt(), "release the lease").catch(() => {});
    return EXIT.LOST;
  }
  const childCode = r.code ?? 128 + signalNumber(r.signal ?? "");
  let released: boolean;
  try {
    released = await timed(releaseIt(), "release the lease");
  } catch (e) {
    await say(`could not release lease '${s.name}' (${describeError(e)}); it expires within ${formatMs(s.leaseMs)}`);
    return childCode;
  }
  if (!released) {
    // Redis no longer had our hold when the command ended: it was lost at some point while the command ran,
    // before the watchdog noticed. The command may have run partly unprotected, so report it as lost.
    throw new CliError(`lost lease '${s.name}': Redis no longer held it when the command exited`, EXIT.LOST);
  }
  return childCode;
}
