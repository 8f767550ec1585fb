#!/usr/bin/env node
/**
 * The `redlease` command line: run a command under a lease, list leases, force-unlock a stuck one.
 *
 *   redlease run NAME [--lease 30s] [--wait 10s] [--url redis://…] -- CMD ARGS…
 *   redlease elect NAME [--lease 8s] [--wait inf] -- CMD ARGS…
 *   redlease observe NAME [--json] [--count N]
 *   redlease watch NAME [--json] [--count N]
 *   redlease inspect [PATTERN] [--json]
 *   redlease unlock NAME --force
 *
 * Runs on Node (the built `dist/cli.js`, which bundles node-redis: `npx -p redlease redlease …`, or
 * `node --import tsx cli/redlease.ts`), Bun (`bunx redlease …`) and Deno (`deno run -A npm:redlease …`, or
 * `deno run -A cli/redlease.ts`). Expected failures are one line on stderr and a documented exit code
 * (`redlease --help`); never a stack trace.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { isRedisUnavailableError } from "../mod.ts";
import process from "node:process";
import { flag, GLOBAL_OPTIONS, type OptionSpec, parseArgs } from "./_args.ts";
import { CliError, describeError, EXIT, EXIT_CODES_HELP, say, usage, write } from "./_common.ts";
import { INSPECT_HELP, inspectCommand } from "./_inspect.ts";
import { OBSERVE_HELP, observeCommand } from "./_observe.ts";
import { elect, ELECT_HELP, run, RUN_HELP } from "./_run.ts";
import { UNLOCK_HELP, unlockCommand } from "./_unlock.ts";
import { WATCH_HELP, watchCommand } from "./_watch.ts";

const HELP = `redlease: distributed leases (locks) on Redis, from the command line

Usage:
  redlease run NAME [options] [--] CMD [ARGS…]  run CMD while holding the lease NAME, renewing it
  redlease elect NAME [options] [--] CMD [ARGS…] run CMD while leading the election NAME (a singleton)
  redlease observe NAME [options]               print an election's leader, then every change
  redlease watch NAME [options]                 print any lease's holders and queue, then every change
  redlease inspect [PATTERN] [options]          list held leases whose names match PATTERN (default *)
  redlease unlock NAME --force [options]        remove every hold of a stuck lease
  redlease help [COMMAND]                       this help, or a command's (also: COMMAND --help)

Options for every command:
  --url URL        Redis URL (default: $REDIS_URL, else redis://localhost:6379)
  --prefix PREFIX  key prefix of the leases (default: redlease)
  -h, --help       show help
  --version        print the version

Environment:
  REDIS_URL        the Redis URL when --url is not given (redis:// or rediss:// for TLS;
                   ACL credentials as redis://USER:PASSWORD@host)
  REDIS_USERNAME, REDIS_PASSWORD
                   the ACL user and password when the URL has none (the URL's win); never printed
  REDLEASE_DEBUG   set to 1 to print stack traces of unexpected errors
  REDLEASE_STATUS  1: show the status line of a waiting run or elect even when stderr is not a terminal;
                   0: never (default: on a terminal only)

${EXIT_CODES_HELP}
`;

const COMMANDS: Record<string, { help: string; main(argv: readonly string[]): Promise<number> }> = {
  run: { help: RUN_HELP, main: run },
  elect: { help: ELECT_HELP, main: elect },
  observe: { help: OBSERVE_HELP, main: observeCommand },
  watch: { help: WATCH_HELP, main: watchCommand },
  inspect: { help: INSPECT_HELP, main: inspectCommand },
  unlock: { help: UNLOCK_HELP, main: unlockCommand },
};

/** Every command word, for the messages about a missing or unknown one. */
const EXPECTED = `expected one of ${[...Object.keys(COMMANDS), "help"].join(", ")}`;

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version?: string };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/** Options accepted before the command word. */
const TOP_OPTIONS: OptionSpec = { ...GLOBAL_OPTIONS, version: "flag" };

async function main(argv: readonly string[]): Promise<number> {
  // Global options may come before the command word: `redlease --url redis://… inspect`.
  let i = 0;
  while (i < argv.length && argv[i].startsWith("-") && argv[i] !== "--") {
    const key = argv[i].startsWith("--") ? argv[i].slice(2).split("=")[0] : "";
    i += TOP_OPTIONS[key] === "value" && !argv[i].includes("=") ? 2 : 1;
  }
  const before = argv.slice(0, Math.min(i, argv.length));
  const top = parseArgs("", before, TOP_OPTIONS);
  if (flag(top, "version")) {
    await write("stdout", `redlease ${version()}\n`);
    return EXIT.OK;
  }
  const word = argv[i];
  if (word === undefined || word === "--") {
    if (flag(top, "help")) {
      await write("stdout", HELP);
      return EXIT.OK;
    }
    throw usage("", `missing a command: ${EXPECTED}`);
  }
  if (word === "help") {
    const topic = argv[i + 1];
    if (topic === undefined) {
      await write("stdout", HELP);
      return EXIT.OK;
    }
    const cmd = COMMANDS[topic];
    if (!cmd) throw usage("", `unknown command '${topic}': ${EXPECTED}`);
    await write("stdout", cmd.help);
    return EXIT.OK;
  }
  const cmd = COMMANDS[word];
  if (!cmd) throw usage("", `unknown command '${word}': ${EXPECTED}`);
  return await cmd.main([...before, ...argv.slice(i + 1)]);
}

/** Errors that come from Redis or the connection to it (node-redis classes, socket errors). */
const REDIS_ERRORS = new Set([
  "ErrorReply",
  "ClientClosedError",
  "ClientOfflineError",
  "DisconnectsClientError",
  "SocketClosedUnexpectedlyError",
  "ConnectionTimeoutError",
  "ReconnectStrategyError",
  "RootNodesUnavailableError",
]);

/** Map an error to its exit code and print its one line. */
async function report(e: unknown): Promise<number> {
  if (e instanceof CliError) {
    await say(e.message);
    return e.code;
  }
  if (isRedisUnavailableError(e)) {
    // An outage, never "busy": the library's own error, with the Redis client's error under it.
    const text = describeError(e), under = e.cause === undefined ? "" : describeError(e.cause);
    await say(under && !text.includes(under) ? `${text} (${under})` : text);
    return EXIT.REDIS;
  }
  const name = (e as { constructor?: { name?: string } })?.constructor?.name ?? "";
  const code = (e as { code?: unknown })?.code;
  if (REDIS_ERRORS.has(name) || (typeof code === "string" && /^E[A-Z]+$/.test(code))) {
    await say(`Redis error: ${describeError(e)}`);
    return EXIT.REDIS;
  }
  if ((e instanceof TypeError || e instanceof RangeError) && e.message.startsWith("Cannot ")) {
    // An argument the library refused that the CLI's own checks let through.
    await say(`${e.message} (see 'redlease --help')`);
    return EXIT.USAGE;
  }
  await say(`internal error: ${describeError(e)} (please report it; REDLEASE_DEBUG=1 prints the stack trace)`);
  if (process.env.REDLEASE_DEBUG) await write("stderr", `${e instanceof Error ? e.stack : String(e)}\n`);
  return EXIT.INTERNAL;
}

const code = await main(process.argv.slice(2)).catch(report);
// Exit explicitly: a runtime may keep a handle alive (signal listeners, a socket closing), and the
// command's result is known now.
process.exit(code);
