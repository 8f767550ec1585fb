// `redlease observe NAME`: print the state of an election, then every change, until interrupted.
import process from "node:process";
import { observe } from "../mod.ts";
import { flag, GLOBAL_OPTIONS, parseArgs, value } from "./_args.ts";
import { checkName, checkPrefix, EXIT, EXIT_CODES_HELP, usage, write } from "./_common.ts";
import { close, connect, type RedisClient, resolveUrl, serverOf } from "./_connect.ts";
import { ownerId } from "./_status.ts";
import { printable } from "./_text.ts";

export const OBSERVE_HELP = `Usage: redlease observe NAME [options]

Print the state of the election NAME (see 'redlease elect'), then a line for every change: a new leader
and term, a proclaimed value, or nobody leading (a resignation, or a leader whose lease ran out). Changes
arrive by message; a leader that died is seen when its lease's TTL ends. Runs until interrupted (SIGINT,
SIGTERM), then exits 0. Leaders, labels and values are shown with control and format characters escaped
(\\n, \\u001b); --json has them exact.

Options:
  --json           print each state as a JSON object { leader, label, term, value, remainingMs } on its
                   own line (label: the leader's, host=… pid=… cmd=… for an elect; null without one)
  --count N        exit after printing N states
  --url URL        Redis URL (default: $REDIS_URL, else redis://localhost:6379)
  --prefix PREFIX  key prefix (default: redlease)
  -h, --help       show this help

Example:
  redlease observe scheduler
  redlease observe scheduler --json | jq -r .value

${EXIT_CODES_HELP}
`;

export async function observeCommand(argv: readonly string[]): Promise<number> {
  const p = parseArgs("observe", argv, { ...GLOBAL_OPTIONS, json: "flag", count: "value" });
  if (flag(p, "help")) {
    await write("stdout", OBSERVE_HELP);
    return EXIT.OK;
  }
  const name = checkName("observe", p.positionals[0]);
  if (p.positionals.length > 1) throw usage("observe", `expected one NAME, got ${p.positionals.length}`);
  const countText = value(p, "count");
  const count = countText === undefined ? Infinity : Number(countText);
  if (countText !== undefined && !/^[1-9]\d{0,8}$/.test(countText)) {
    throw usage("observe", `--count must be a positive integer, not '${countText}'`);
  }
  const prefix = checkPrefix("observe", value(p, "prefix"));
  const url = resolveUrl("observe", value(p, "url"));
  const json = flag(p, "json");
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, onSignal);
  let client: RedisClient | undefined;
  try {
    client = await connect(url);
    if (!json) await write("stdout", `observing election '${name}' on ${serverOf(url)}\n`);
    let printed = 0;
    for await (const s of observe(client, name, { prefix, signal: stop.signal })) {
      const line = json
        ? JSON.stringify({
          leader: s.leader ?? null,
          label: s.label ?? null,
          term: s.term,
          value: s.value ?? null,
          remainingMs: s.remainingMs,
        })
        : s.leader === undefined
        ? `nobody leads${s.term > 0 ? ` (last term ${s.term})` : ""}`
        // Leader, label and value as read from Redis: escaped (see printable()), one line per state.
        : `term ${s.term}: ${
          printable(s.label === undefined ? s.leader : `${s.label} (${ownerId(s.leader, s.label)})`)
        }` + (s.value === undefined ? "" : ` = ${printable(s.value)}`);
      await write("stdout", line + "\n");
      if (++printed >= count) break;
    }
    return EXIT.OK;
  } finally {
    for (const sig of ["SIGINT", "SIGTERM"] as const) process.off(sig, onSignal);
    await close(client);
  }
}
