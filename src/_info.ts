// What inspect() and watch() report of one lease: the public types and the conversion of an inspect.lua snapshot.
import { kindName, labelOf, permitsOf, type Snapshot, weightOf } from "./_protocol.ts";
import type { LeaseKind } from "./lease.ts";

/** One holder of a lease, as `inspect()` (and `watch()`) reports it. */
export interface LeaseHolder {
  /** The owner string (see `Lease.owner`). */
  readonly owner: string;
  /** The `label` it was acquired with, else undefined. */
  readonly label: string | undefined;
  /** Its reentrant hold count. */
  readonly holds: number;
  /** How it holds the lease (an exclusive holder may hold it shared as well: then it is listed twice). */
  readonly kind: LeaseKind;
  /** How many permits it holds (its `weight`); 1 for any other hold. */
  readonly weight: number;
  /**
   * Remaining TTL of this hold in ms; for a hold in `delayed`, what is left of its lock delay (the time until its
   * place is free).
   */
  readonly remainingMs: number;
  /** The `lockDelayMs` the hold was acquired with (0: none). */
  readonly lockDelayMs: number;
}

/** What `inspect()` (and `watch()`) reports about one lease, read atomically. */
export interface LeaseInfo {
  /** The lease name. */
  readonly name: string;
  /** Whether any owner holds it (a hold in its lock delay is no one's: see `delayed`). */
  readonly held: boolean;
  /**
   * How it is held: "exclusive" (also when free), "shared" (by shared holds only), or "permits" (as `permits`
   * permits).
   */
  readonly kind: "exclusive" | "shared" | "permits";
  /** The number of permits while held as permits, else undefined. */
  readonly permits: number | undefined;
  /**
   * While held as permits, how many of them are taken: the weights of `owners` and `delayed` summed (never above
   * `permits`), else undefined.
   */
  readonly permitsTaken: number | undefined;
  /** Holders and their reentrant hold counts (at most one exclusive holder). */
  readonly owners: ReadonlyArray<LeaseHolder>;
  /** Remaining TTL in ms while held (the latest of its holds), else 0. */
  readonly remainingMs: number;
  /** The latest fence handed out for this name, or 0 when Redis keeps no record of one. */
  readonly fence: number;
  /** Queued waiters (entries of clients that died are counted until a release skips them). */
  readonly waiters: number;
  /**
   * Holds in their lock delay (see `lockDelayMs` of acquire): their holder let them expire without a release, and
   * their place (the lease, a share or a permit) is granted to nobody until the delay ends. Each one's `remainingMs`
   * is what is left of its delay. Empty when none.
   */
  readonly delayed: ReadonlyArray<LeaseHolder>;
  /**
   * Ms until the last lock delay in `delayed` ends (for an exclusive lease: until it can be granted again), 0 when
   * none.
   */
  readonly delayMs: number;
}

/** The state a snapshot of the lease `name` shows. */
export function leaseInfo(name: string, snapshot: Snapshot): LeaseInfo {
  const owners: LeaseHolder[] = [], delayed: LeaseHolder[] = [];
  for (const holder of snapshot.holders) {
    // (A hold's ms left, for its holder, is <= 0 once it is in its lock delay.)
    const inDelay = holder.lockDelayMs > 0 && holder.pttl <= 0;
    (inDelay ? delayed : owners).push({
      owner: holder.owner,
      label: labelOf(holder.owner),
      holds: holder.holds,
      kind: kindName(holder.kind),
      weight: weightOf(holder.kind),
      remainingMs: Math.max(0, inDelay ? holder.pttl + holder.lockDelayMs : holder.pttl),
      lockDelayMs: holder.lockDelayMs,
    });
  }
  const held = owners.length > 0;
  const delayMs = delayed.length > 0 ? Math.max(...delayed.map((owner) => owner.remainingMs)) : 0;
  const kind = kindName(snapshot.mode, "permits");
  const permits = permitsOf(snapshot.mode);
  const permitsTaken = permits === undefined
    ? undefined
    : [...owners, ...delayed].reduce((sum, holder) => sum + holder.weight, 0);
  const remainingMs = held ? Math.max(...owners.map((owner) => owner.remainingMs)) : 0;
  return {
    name,
    held,
    kind,
    permits,
    permitsTaken,
    owners,
    remainingMs,
    fence: snapshot.fence,
    waiters: snapshot.waiters,
    delayed,
    delayMs,
  };
}
