// `redlease observe NAME`: print the state of an election, then every change, until interrupted.
import { observe } from "../mod.ts";
import { EXIT_CODES_HELP } from "./_common.ts";
import { follow } from "./_follow.ts";
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

export function observeCommand(argv: readonly string[]): Promise<number> {
  return follow(
    "observe",
    argv,
    OBSERVE_HELP,
    (name, server) => `observing election '${name}' on ${server}`,
    async function* (f) {
      for await (const s of observe(f.client, f.name, { prefix: f.prefix, signal: f.signal })) {
        yield f.json
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
      }
    },
  );
}
