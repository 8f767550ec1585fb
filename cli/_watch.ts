// `redlease watch NAME`: print the state of any lease, then a line per change, until interrupted.
import { type LeaseChange, type LeaseHolder, type LeaseInfo, watch } from "../src/watch.ts";
import { EXIT_CODES_HELP } from "./_common.ts";
import { follow } from "./_follow.ts";
import { ownerId } from "./_status.ts";
import { printable } from "./_text.ts";

export const WATCH_HELP = `Usage: redlease watch NAME [options]

Print the state of the lease NAME, of any kind (exclusive, shared, permits, an election's), then a line
per change as it happens: a hold granted, released, or expired (still held when its TTL ran out), and
the number of waiters growing or shrinking. Grants and releases arrive by message; an expiry is seen
when the TTL read last ends; the queue at least every 2 s. A lease nobody watches pays nothing for it.
Runs until interrupted (SIGINT, SIGTERM), then exits 0. Owners and labels are shown with control and
format characters escaped (\\n, \\u001b); --json has them exact.

Options:
  --json           print each change as a JSON object on its own line: { type, holder, waiters, was,
                   state } (type: state, granted, released, expired or queue; holder: { owner, label,
                   kind, holds, remainingMs } or null; was: the waiters before, for queue, else null;
                   state: the lease after the change, as 'redlease inspect --json' prints a lease)
  --count N        exit after printing N lines
  --url URL        Redis URL (default: $REDIS_URL, else redis://localhost:6379)
  --prefix PREFIX  key prefix (default: redlease)
  -h, --help       show this help

Example:
  redlease watch cron:cleanup
  redlease watch cron:cleanup --json | jq -c 'select(.type == "expired")'

${EXIT_CODES_HELP}
`;

/** A holder as a line shows it: its label and owner id, or its owner. */
function who(h: LeaseHolder): string {
  return printable(h.label === undefined ? h.owner : `${h.label} (${ownerId(h.owner, h.label)})`);
}

/**
 * The line of one change; `before`: the state before the read that found it (a hold that ended is shown with the
 * fence of then, its own: after it the lease has another holder's, or none).
 */
function line(c: LeaseChange, before: LeaseInfo | undefined): string {
  const i = c.info;
  const kind = i.kind === "permits" ? `${i.permits} permits` : i.kind;
  const waiting = i.waiters > 0 ? `, ${i.waiters} waiting` : "";
  if (c.type === "state") {
    if (!i.held) return `free (fence ${i.fence}${waiting})`;
    return `held ${kind} by ${i.owners.map(who).join(", ")}, fence ${i.fence}, ${i.remainingMs} ms left${waiting}`;
  }
  if (c.type === "queue") return `queue ${c.was} -> ${i.waiters}`;
  const left = c.type === "granted" ? `, ${c.holder.remainingMs} ms left` : "";
  const fence = c.type === "granted" ? i.fence : before?.fence ?? i.fence;
  return `${c.type} ${c.holder.kind}: ${who(c.holder)}, fence ${fence}${left}${waiting}`;
}

function json(c: LeaseChange): string {
  const holder = c.type === "granted" || c.type === "released" || c.type === "expired"
    ? { ...c.holder, label: c.holder.label ?? null }
    : null;
  const state = {
    ...c.info,
    permits: c.info.permits ?? null,
    owners: c.info.owners.map((h) => ({ ...h, label: h.label ?? null })),
    delayed: c.info.delayed.map((h) => ({ ...h, label: h.label ?? null })),
  };
  return JSON.stringify({
    type: c.type,
    holder,
    waiters: c.info.waiters,
    was: c.type === "queue" ? c.was : null,
    state,
  });
}

export function watchCommand(argv: readonly string[]): Promise<number> {
  return follow(
    "watch",
    argv,
    WATCH_HELP,
    (name, server) => `watching lease '${name}' on ${server}`,
    async function* (f) {
      // The changes one read found share its state: `before` is the state of the read before.
      let read: LeaseInfo | undefined, before: LeaseInfo | undefined;
      for await (const c of watch(f.client, f.name, { prefix: f.prefix, signal: f.signal })) {
        if (c.info !== read) [before, read] = [read, c.info];
        yield f.json ? json(c) : line(c, before);
      }
    },
  );
}
