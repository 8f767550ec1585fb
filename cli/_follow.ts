// The loop `observe` and `watch` share: NAME, --count, --json, --prefix and --url read the same way, the lines printed
// as they come, and Ctrl-C or SIGTERM ending it with exit 0.
import process from "node:process";
import { flag, GLOBAL_OPTIONS, parseArgs, value } from "./_args.ts";
import { checkName, checkPrefix, EXIT, usage, write } from "./_common.ts";
import { close, connect, type RedisClient, resolveUrl, serverOf } from "./_connect.ts";

/** What a following command's lines are made from. */
export interface Following {
  readonly client: RedisClient;
  readonly name: string;
  readonly prefix: string;
  readonly json: boolean;
  /** Aborted by Ctrl-C or SIGTERM. */
  readonly signal: AbortSignal;
}

/**
 * Run `command` (its `--help` text `help`): print `title(name, server)` unless `--json`, then each line `lines` yields,
 * until `--count` lines, the iterable's end, or a signal.
 */
export async function follow(
  command: string,
  argv: readonly string[],
  help: string,
  title: (name: string, server: string) => string,
  lines: (f: Following) => AsyncIterable<string>,
): Promise<number> {
  const p = parseArgs(command, argv, { ...GLOBAL_OPTIONS, json: "flag", count: "value" });
  if (flag(p, "help")) {
    await write("stdout", help);
    return EXIT.OK;
  }
  const name = checkName(command, p.positionals[0]);
  if (p.positionals.length > 1) throw usage(command, `expected one NAME, got ${p.positionals.length}`);
  const countText = value(p, "count");
  const count = countText === undefined ? Infinity : Number(countText);
  if (countText !== undefined && !/^[1-9]\d{0,8}$/.test(countText)) {
    throw usage(command, `--count must be a positive integer, not '${countText}'`);
  }
  const prefix = checkPrefix(command, value(p, "prefix"));
  const url = resolveUrl(command, value(p, "url"));
  const json = flag(p, "json");
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, onSignal);
  let client: RedisClient | undefined;
  try {
    client = await connect(url);
    if (!json) await write("stdout", title(name, serverOf(url)) + "\n");
    let printed = 0;
    for await (const line of lines({ client, name, prefix, json, signal: stop.signal })) {
      await write("stdout", line + "\n");
      if (++printed >= count) break;
    }
    return EXIT.OK;
  } finally {
    for (const sig of ["SIGINT", "SIGTERM"] as const) process.off(sig, onSignal);
    await close(client);
  }
}
