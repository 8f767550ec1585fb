// The status line of a waiting `run` / `elect`: one line on stderr, rewritten in place, that says how long it has
// waited, who holds the lease (by label when they have one) and where this run is in the queue. Only on a terminal
// (or when REDLEASE_STATUS=1 forces it): a script's stderr stays as it was.
import process from "node:process";
import { inspect, type LeaseInfo } from "../mod.ts";
import { stateOf } from "../src/_client.ts";
import { keysOf } from "../src/_protocol.ts";
import { formatMs } from "./_args.ts";
import type { RedisClient } from "./_connect.ts";
import { cutToColumns, printable } from "./_text.ts";

/** How often the line is refreshed (one inspect and one queue read each time), and how late it first shows. */
export const STATUS_EVERY_MS = 500;
/** How long one refresh may wait for Redis before the line says so; the wait itself is not affected. */
const STATUS_TIMEOUT_MS = 1_000;

/** Whether to show the status line: REDLEASE_STATUS=1 forces it on, =0 off; otherwise when stderr is a terminal. */
export function statusWanted(): boolean {
  const forced = process.env.REDLEASE_STATUS;
  if (forced === "1") return true;
  if (forced === "0") return false;
  return process.stderr.isTTY === true;
}

/** The owner id of an owner string: without the label that follows a space. */
export function ownerId(owner: string, label: string | undefined): string {
  return label === undefined ? owner : owner.slice(0, owner.length - label.length - 1);
}

/** 1st, 2nd, 3rd, 4th, … 11th, 12th, 13th, 21st. */
function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? "th" : ["th", "st", "nd", "rd"][n % 10] ?? "th";
  return `${n}${suffix}`;
}

/** Who holds it, for the line: labels (or owner ids), the kind, and the time left. */
export function holdersText(info: LeaseInfo): string {
  // A hold in its lock delay (its holder vanished without a release) keeps its place from this run until it ends.
  const delay = info.delayMs > 0 ? `in a lock delay for ${formatMs(info.delayMs)} more` : undefined;
  if (!info.held) return delay ?? "free (being handed over)";
  const who = info.owners.map((o) => printable(o.label ?? ownerId(o.owner, o.label)));
  const shown = who.length > 2 ? `${who.slice(0, 2).join(", ")} and ${who.length - 2} more` : who.join(", ");
  const kind = info.kind === "permits"
    ? `${info.owners.length} of ${info.permits} permits`
    : info.kind === "shared"
    ? `shared by ${info.owners.length}`
    : "exclusive";
  return `held by ${shown} (${kind}, ${formatMs(info.remainingMs)} left)${delay ? `, ${delay}` : ""}`;
}

/** One status line. */
export function statusText(
  name: string,
  waitedMs: number,
  info: LeaseInfo | undefined,
  place: number | undefined,
): string {
  const waited = waitedMs < 60_000 ? `${(Math.floor(waitedMs / 100) / 10).toFixed(1)}s` : formatMs(waitedMs);
  const parts = [`redlease: waiting ${waited} for '${printable(name)}'`];
  if (info === undefined) parts.push("Redis is slow to answer");
  else {
    // The place before the holders, whose labels are long: what is cut to the terminal's width is the end.
    if (place !== undefined && info.waiters > 0) {
      parts.push(`${ordinal(Math.min(place, info.waiters))} of ${info.waiters} in queue`);
    } else if (info.waiters > 0) parts.push(`${info.waiters} in queue`);
    parts.push(holdersText(info));
  }
  return parts.join(" · ");
}

/**
 * Fit `text` into `columns` terminal columns (less one), so that it never wraps: a wrapped line cannot be cleared.
 * Measured in columns, not characters: CJK characters and most emoji take two.
 */
export function fit(text: string, columns: number | undefined): string {
  return cutToColumns(text, Math.max(20, (columns || 80) - 1)); // 0 on a terminal of unknown size
}

/**
 * Where this client's waiter is in the queue of `name` (1 = next), or undefined. Its entry is the one that starts
 * with this client's id (entries are `client|attempt|ms|claim ms|kind|owner`, in arrival order): the CLI waits
 * once per client, and labels need not be unique (same host and pid in two containers). The entry is looked for
 * with ZSCAN MATCH (only it comes back), then remembered: later refreshes cost one ZRANK, until it is gone.
 */
export function queuePlace(
  client: RedisClient,
  prefix: string,
  name: string,
): () => Promise<number | undefined> {
  const key = keysOf(prefix, name).queue;
  // A hex UUID: no glob characters to escape.
  const mine = `${stateOf(client).id}|`;
  let entry: string | undefined;
  const find = async (): Promise<string | undefined> => {
    let cursor = "0";
    do {
      const [next, found] = await client.sendCommand([
        "ZSCAN",
        key,
        cursor,
        "MATCH",
        `${mine}*`,
        "COUNT",
        "1000",
      ]) as [string, string[]];
      // ZSCAN answers member, score, member, score, …
      for (let i = 0; i < found.length; i += 2) if (found[i].startsWith(mine)) return found[i];
      cursor = String(next);
    } while (cursor !== "0");
    return undefined;
  };
  return async () => {
    for (let tries = 0; tries < 2; tries++) {
      entry ??= await find();
      if (entry === undefined) return undefined;
      const rank = await client.sendCommand(["ZRANK", key, entry]) as number | null;
      if (rank !== null) return Number(rank) + 1;
      entry = undefined; // gone (granted, or re-queued with another attempt): look for it again
    }
    return undefined;
  };
}
/** `p`, or undefined if it has not settled within STATUS_TIMEOUT_MS. */
function withinTimeout<T>(p: Promise<T>): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), STATUS_TIMEOUT_MS);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/**
 * Start refreshing the status line every STATUS_EVERY_MS, the first time after that long (a lease granted at
 * once shows nothing). `stop()` clears the line and resolves once it is cleared; call it before writing anything
 * else to stderr.
 */
export function startStatus(
  client: RedisClient,
  o: { name: string; prefix: string; start: number },
): { stop(): Promise<void> } {
  const placeNow = queuePlace(client, o.prefix, o.name);
  let stopped = false;
  let shown = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const draw = (text: string) =>
    new Promise<void>((resolve) => {
      try {
        process.stderr.write(text, () => resolve());
      } catch {
        resolve();
      }
    });
  const refresh = async () => {
    let info: LeaseInfo | undefined;
    let place: number | undefined;
    try {
      [info, place] = await Promise.all([
        inspect(client, o.name, { prefix: o.prefix, timeoutMs: STATUS_TIMEOUT_MS }),
        withinTimeout(placeNow().catch(() => undefined)),
      ]);
    } catch { /* shown as slow; the wait reports real failures */ }
    if (stopped) return;
    shown = true;
    await draw(`\r\x1b[2K${fit(statusText(o.name, performance.now() - o.start, info, place), process.stderr.columns)}`);
  };
  const schedule = () => {
    timer = setTimeout(() => {
      void refresh().finally(() => {
        if (!stopped) schedule();
      });
    }, STATUS_EVERY_MS);
    // Never what keeps the process alive.
    (timer as { unref?: () => void }).unref?.();
  };
  schedule();
  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      // A refresh still in flight draws nothing now; one drawn already was written before this clear.
      if (shown) await draw("\r\x1b[2K");
    },
  };
}
