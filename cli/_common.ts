// Shared by the CLI commands: exit codes, the one-line error type, output that is flushed before exiting.
import process from "node:process";
import { printable } from "./_text.ts";

/** Exit codes, documented in `redlease --help` and the README. Distinct so scripts can tell them apart. */
export const EXIT = {
  OK: 0,
  /** `unlock`: the lease was not held. */
  NOT_HELD: 1,
  /** Unknown command or option, missing argument, bad duration, name or URL. */
  USAGE: 2,
  /** The lease is held by another owner and `--wait` ran out (at once with `--wait 0`). */
  BUSY: 3,
  /** `run`: the lease was lost while the command ran. */
  LOST: 4,
  /**
   * Redis unavailable (unreachable, or no answer in time: an outage, never BUSY), a Redis error (NOPERM,
   * WRONGPASS), or (run from source) node-redis missing.
   */
  REDIS: 5,
  /** A bug in redlease. */
  INTERNAL: 70,
  /** `run`: the command exists but could not be executed (shell convention). */
  CANNOT_EXECUTE: 126,
  /** `run`: the command was not found (shell convention). */
  NOT_FOUND: 127,
} as const;

export const EXIT_CODES_HELP = `Exit codes:
  0         success (run: the command exited 0; observe, watch: interrupted, or --count lines printed)
  1         unlock: the lease was not held
  2         usage error: unknown command or option, missing argument, bad duration, name or URL
  3         busy: another owner holds the lease and --wait ran out (at once with --wait 0), or it is held
            in a way this run cannot join (another number of --permits, or exclusive/shared against permits)
  4         run: the lease was lost while the command ran; the command got SIGTERM (SIGKILL after --grace)
  5         Redis unavailable (unreachable, or no answer in time: an outage, never reported as busy),
            or a Redis error (such as NOPERM, WRONGPASS); or, run from source, node-redis missing
  70        internal error (a bug; REDLEASE_DEBUG=1 prints the stack trace)
  126, 127  run: the command could not be executed / was not found
  128+N     run: the command was killed by signal N, or redlease got signal N while waiting for the lease
  other     run: the command's own exit code`;

/** An expected failure: reported as one line on stderr, and the process exits with `code`. */
export class CliError extends Error {
  constructor(message: string, readonly code: number) {
    super(message);
  }
}

/** A usage error of `command`, with a pointer to its help on the same line. */
export function usage(command: string, message: string): CliError {
  const where = command ? `redlease ${command} --help` : "redlease --help";
  return new CliError(`${message} (see '${where}')`, EXIT.USAGE);
}

/** Write and wait until the runtime has taken the text, so that a following process.exit() loses nothing. */
export function write(stream: "stdout" | "stderr", text: string): Promise<void> {
  return new Promise((resolve) => {
    const s = stream === "stdout" ? process.stdout : process.stderr;
    try {
      s.write(text, () => resolve());
    } catch {
      resolve(); // a closed pipe must not turn into a stack trace
    }
  });
}

/**
 * One line on stderr, prefixed with `redlease: `. Escaped (see printable()): a message may quote a Redis error reply
 * or a name with control characters in it, and stays one line of text.
 */
export function say(line: string): Promise<void> {
  return write("stderr", `redlease: ${printable(line)}\n`);
}

/** The message of an error as one line; AggregateError (Node's happy-eyeballs connect) lists its parts. */
export function describeError(e: unknown): string {
  if (e instanceof AggregateError && e.errors.length > 0) {
    return [...new Set(e.errors.map(describeError))].join("; ");
  }
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    const msg = e.message || (typeof code === "string" ? code : e.name);
    return msg.split("\n")[0];
  }
  return String(e).split("\n")[0];
}

/** How long to wait for any single Redis reply before giving up with exit code 5. */
export const REPLY_TIMEOUT_MS = 10_000;

/** Reject with a CliError (exit 5) if `p` does not settle within REPLY_TIMEOUT_MS. */
export function timed<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new CliError(`Redis did not answer within ${REPLY_TIMEOUT_MS / 1000}s while trying to ${what}`, EXIT.REDIS),
        ),
      REPLY_TIMEOUT_MS,
    );
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** The lease name rules of the library, checked here so a bad name is a usage error. */
export function checkName(command: string, name: string | undefined): string {
  if (name === undefined || name === "") throw usage(command, "missing the lease NAME");
  if (name.length > 1024) throw usage(command, `the lease NAME must be at most 1024 characters (got ${name.length})`);
  return name;
}

export function checkPrefix(command: string, prefix: string | undefined): string {
  if (prefix === undefined) return "redlease";
  if (prefix === "" || /[{}]/.test(prefix)) {
    throw usage(command, `bad --prefix '${prefix}': it must be non-empty and contain no '{' or '}'`);
  }
  return prefix;
}
