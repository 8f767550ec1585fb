// `redlease inspect [PATTERN]`: the held leases whose names match a glob, as a table or JSON.
import { inspect, type LeaseHolder, type LeaseInfo } from "../mod.ts";
import { flag, formatMs, GLOBAL_OPTIONS, parseArgs, value } from "./_args.ts";
import { checkPrefix, EXIT, EXIT_CODES_HELP, timed, usage, write } from "./_common.ts";
import { close, connect, type RedisClient, resolveUrl, serverOf } from "./_connect.ts";
import { ownerId } from "./_status.ts";
import { textTable } from "./_table.ts";
import { printable } from "./_text.ts";

export const INSPECT_HELP = `Usage: redlease inspect [PATTERN] [options]

List the held leases whose names match PATTERN, a Redis glob (* ? [abc] \\x; default *), after a line
that names the Redis server, database and key prefix read. One row per lease: name, kind (exclusive,
shared, or T of N permits: T taken), owners (an exclusive holder that also holds it shared is listed
twice), hold counts, weights (the permits each holds; 1 for other holds), remaining TTL, fence (the
latest fencing token), the number of queued waiters (entries of waiters that died count until a
release skips them) and HOLDER: who holds it, by label. A lease in its lock
delay (a hold with 'lockDelayMs' expired without a release: granted to nobody until the delay ends) is
listed too: its vanished owners are marked '(delayed)', and REMAINING says 'delay' and what is left of it. A 'redlease run' or
'elect' labels its hold host=… pid=… cmd=…; a library hold shows the 'label' option it was acquired with,
else '-'. Names, owners and labels are shown with control and format characters escaped (\\n, \\u001b);
--json has them exact. Each lease is read atomically; the list is assembled with SCAN, so leases taken or
released meanwhile may be missed.

Options:
  --json           print a JSON array of { name, held, kind, permits, permitsTaken, owners: [{ owner,
                   label, holds, kind, weight, remainingMs, lockDelayMs }], remainingMs, fence, waiters,
                   delayed: [as owners, remainingMs what is left of the delay], delayMs } instead of the
                   line and table
  --all            also list names that are not held but still have a record (a fence kept for 10s
                   after release, or queued waiters)
  --url URL        Redis URL (default: $REDIS_URL, else redis://localhost:6379)
  --prefix PREFIX  key prefix (default: redlease)
  -h, --help       show this help

Examples:
  redlease inspect
  redlease inspect 'cron:*' --json | jq '.[].remainingMs'

${EXIT_CODES_HELP}
`;

/** Escape the glob characters of a literal for SCAN MATCH. */
function globLiteral(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

// In keys, a name's '%' and '}' are percent-encoded (so the whole name is the hash tag): `<prefix>:{<tag>}`.
const encodeTag = (s: string) => s.replace(/[%}]/g, (c) => (c === "%" ? "%25" : "%7D"));
const decodeTag = (s: string) => s.replace(/%(25|7D)/g, (_, hex) => (hex === "25" ? "%" : "}"));

/** Names of the lease keys (strings) under `prefix` whose name matches `pattern` (queues are sorted sets: skipped). */
async function scanNames(client: RedisClient, prefix: string, pattern: string): Promise<string[]> {
  const head = `${prefix}:{`;
  const match = `${globLiteral(head)}${encodeTag(pattern)}}`;
  const names = new Set<string>();
  let cursor = "0";
  do {
    const reply = await timed(
      client.sendCommand(["SCAN", cursor, "MATCH", match, "COUNT", "1000", "TYPE", "string"]),
      "scan for leases",
    ) as [string, string[]];
    cursor = String(reply[0]);
    for (const key of reply[1]) {
      if (key.startsWith(head) && key.endsWith("}") && !key.endsWith("}:q")) {
        names.add(decodeTag(key.slice(head.length, -1)));
      }
    }
  } while (cursor !== "0");
  return [...names].sort();
}

function toJson(infos: readonly LeaseInfo[]): string {
  const holder = (o: LeaseHolder) => ({
    owner: o.owner,
    label: o.label ?? null,
    holds: o.holds,
    kind: o.kind,
    weight: o.weight,
    remainingMs: o.remainingMs,
    lockDelayMs: o.lockDelayMs,
  });
  return JSON.stringify(
    infos.map((i) => ({
      name: i.name,
      held: i.held,
      kind: i.kind,
      permits: i.permits,
      permitsTaken: i.permitsTaken,
      owners: i.owners.map(holder),
      remainingMs: i.remainingMs,
      fence: i.fence,
      waiters: i.waiters,
      delayed: i.delayed.map(holder),
      delayMs: i.delayMs,
    })),
    null,
    2,
  ) + "\n";
}

/** The table: names, owners and labels as read from Redis, escaped (see printable()) so that a row stays a row. */
function toTable(infos: readonly LeaseInfo[]): string {
  const rows = infos.map((i) => {
    // The live holders, then those in their lock delay (marked).
    const all = [...i.owners, ...i.delayed];
    const mark = (n: number) => (n >= i.owners.length ? " (delayed)" : "");
    const remaining = [i.held ? formatMs(i.remainingMs) : "", i.delayMs > 0 ? `delay ${formatMs(i.delayMs)}` : ""]
      .filter((s) => s !== "").join(", ");
    return [
      printable(i.name),
      i.kind === "permits" ? `${i.permitsTaken} of ${i.permits} permits` : i.kind,
      all.length > 0 ? all.map((o, n) => printable(ownerId(o.owner, o.label)) + mark(n)).join(", ") : "-",
      all.length > 0 ? all.map((o) => String(o.holds)).join(", ") : "0",
      all.length > 0 ? all.map((o) => String(o.weight)).join(", ") : "0",
      remaining === "" ? "-" : remaining,
      i.fence === 0 ? "-" : String(i.fence),
      String(i.waiters),
      // Last: the widest column, and free text.
      all.length > 0 ? all.map((o) => o.label === undefined ? "-" : printable(o.label)).join(", ") : "-",
    ];
  });
  return textTable(
    ["NAME", "KIND", "OWNER", "HOLDS", "WEIGHT", "REMAINING", "FENCE", "WAITERS", "HOLDER"],
    rows,
    ["left", "left", "left", "right", "right", "right", "right", "right", "left"],
  );
}

export async function inspectCommand(argv: readonly string[]): Promise<number> {
  const p = parseArgs("inspect", argv, { ...GLOBAL_OPTIONS, json: "flag", all: "flag" });
  if (flag(p, "help")) {
    await write("stdout", INSPECT_HELP);
    return EXIT.OK;
  }
  if (p.positionals.length > 1) throw usage("inspect", `expected at most one PATTERN, got ${p.positionals.length}`);
  const pattern = p.positionals[0] ?? "*";
  if (pattern === "") throw usage("inspect", "PATTERN must not be empty");
  const prefix = checkPrefix("inspect", value(p, "prefix"));
  const url = resolveUrl("inspect", value(p, "url"));
  let client: RedisClient | undefined;
  try {
    client = await connect(url);
    const c = client;
    const names = await scanNames(c, prefix, pattern);
    const infos = await timed(Promise.all(names.map((n) => inspect(c, n, { prefix }))), "inspect the leases");
    const shown = flag(p, "all")
      ? infos.filter((i) => i.held || i.delayMs > 0 || i.fence > 0 || i.waiters > 0)
      : infos.filter((i) => i.held || i.delayMs > 0);
    if (flag(p, "json")) await write("stdout", toJson(shown));
    else {
      // Which server was read: its address and database, never its credentials.
      const what = flag(p, "all") ? "lease records" : "held leases";
      const where = `${serverOf(url)}, prefix '${prefix}'`;
      if (shown.length === 0) await write("stdout", `${where}: no ${what} match '${pattern}'\n`);
      else {
        const count = shown.length === 1 ? `1 ${what.replace(/s$/, "")} matches` : `${shown.length} ${what} match`;
        await write("stdout", `${where}: ${count} '${pattern}'\n${toTable(shown)}`);
      }
    }
    return EXIT.OK;
  } finally {
    await close(client);
  }
}
