/**
 * A held lease. Returned by {@linkcode acquire} and passed to the {@linkcode withLock} callback.
 *
 * `await using lease = await acquire(client, name)` releases it when the scope ends.
 *
 * @example Hold a lease for a block and pass its fence to the protected resource
 * ```ts
 * import { acquire } from "redlease";
 * await using lease = await acquire(client, "invoice:42");
 * await db.write({ fence: lease.fence, signal: lease.signal });
 * ```
 */
export interface Lease extends AsyncDisposable {
  /** The lease name passed to `acquire` (for several names, they joined by ", "). */
  readonly name: string;
  /** The names this lease holds: `[name]`, or the several names passed to `acquire`, in that order. */
  readonly names: readonly string[];
  /** Each name's fence, in the order of `names` (every name keeps its own; `fence` is the first). */
  readonly fences: readonly number[];
  /**
   * How this hold shares the lease: "exclusive" (the default), "shared" (`shared: true`) or "permit" (one of the
   * `permits` of the lease).
   */
  readonly kind: LeaseKind;
  /**
   * The owner this hold counts for, as Redis knows it: an id unique to the call (followed by a space and the `label`,
   * if one was given), or the `owner` given, scoped to the
   * client (`<client id>:<owner>`) so that the same string in two processes is two owners. Passing it back as
   * `owner` on the same client re-enters the hold.
   */
  readonly owner: string;
  /**
   * Fencing token: strictly greater than every token handed out earlier for this name (see
   * docs/fencing.md). Reentrant holds share their first hold's token. Pass it to the resource you protect and have it
   * reject writes carrying a token lower than the highest it has seen.
   */
  readonly fence: number;
  /**
   * Aborts when the hold ends: with a {@linkcode LeaseLostError} reason when the lease is lost, with an
   * `AbortError` DOMException when it is released.
   */
  readonly signal: AbortSignal;
  /**
   * Conservative local deadline on the `performance.now()` clock: the lease is held at least until then unless
   * Redis loses it. Measured from before the command was sent, minus a drift margin (1 % of the lease + 2 ms).
   * Watchdog renewals move it forward.
   */
  readonly expiresAt: number;
  /** `expiresAt - performance.now()`, never below 0. */
  readonly remainingMs: number;
  /**
   * This hold as a string for another process, which takes it over with {@linkcode resume}: an HTTP handler that
   * acquires, and a job worker that finishes. It names the lease, the owner and the fence (it is as good as the
   * owner: pass it where you would pass the lease itself). Leases on one Redis only: a Redlock lease throws
   * `TypeError`.
   */
  readonly token: string;
}

/** How a hold shares its lease (see {@linkcode Lease.kind}). */
export type LeaseKind = "exclusive" | "shared" | "permit";

/**
 * Options of `release`, `extend`, `forceUnlock`, `inspect` and `resume`: how long to wait for Redis. As for every
 * options object of redlease, a key that is none of these is a `TypeError` naming it and the closest valid one, before
 * any Redis command (`{ timeout: 500 }`: "unknown option 'timeout' (did you mean 'timeoutMs'?)").
 */
export interface CallOptions {
  /**
   * How long the call may wait for Redis, in ms; it then rejects with {@linkcode RedisTimeoutError} (the
   * command's outcome is unknown; an outage, never a {@linkcode LockTimeoutError}). Integer from 1 to 2147483647.
   * @default {the lease's remaining time, at least 250 ms, for release and extend; 5000 for forceUnlock, inspect and resume}
   */
  readonly timeoutMs?: number;
}

/**
 * Where the keys of a lease live.
 */
export interface KeyOptions {
  /**
   * Key prefix. The lease named `name` uses the hash `<prefix>:{<name>}`, its wait queue
   * `<prefix>:{<name>}:q` and channels `<prefix>:{<name>}:w:<client id>` (one hash slot per name).
   * Must not contain `{` or `}`.
   * @default {"redlease"}
   */
  readonly prefix?: string;
}

/**
 * Options for {@linkcode acquire} and {@linkcode withLock}. An unknown key is a `TypeError` that names it and the
 * closest valid one, before any Redis command: in plain JavaScript, `{ wait: 1000 }` would otherwise wait with the
 * default.
 *
 * @example
 * ```ts
 * import { acquire } from "redlease";
 * // TypeError: Cannot acquire lease: unknown option 'wait' (did you mean 'waitMs'?)
 * await acquire(client, "report", { wait: 1000 } as never).catch((e) => console.error(e.message));
 * ```
 */
export interface AcquireOptions extends KeyOptions {
  /**
   * A shared hold (the read side of a read-write lock). Shared holds coexist with one another; an exclusive hold
   * (the default) excludes them and they exclude it. Waiting is first come, first served across both: a queued
   * exclusive waiter is not passed by newer shared requests, and the release of an exclusive hold admits the whole
   * run of shared waiters at the head of the queue at once. An exclusive holder may add a shared hold (a downgrade:
   * it shares the exclusive hold's fence and outlives it if released later); a shared holder asking for an exclusive
   * hold gets {@linkcode LeaseKindError} at once instead of a deadlock. Every shared hold has its own fence, signal,
   * watchdog or fixed lease, and frees with its TTL if its holder dies. Works on a Redlock group too.
   * @default {false}
   * @example Readers share a report; the nightly rebuild waits for them and excludes them while it writes
   * ```ts
   * await using read = await acquire(client, "report:42", { shared: true });
   * await using write = await acquire(client, "report:42"); // elsewhere: waits for every reader
   * ```
   */
  readonly shared?: boolean;
  /**
   * Take one of `permits` permits (a counting semaphore): up to that many holds coexist, each a lease with its own
   * fence, signal, watchdog or fixed lease and local deadline; a dead holder's permit frees with its TTL (as
   * Redisson's RPermitExpirableSemaphore). Freeing a permit wakes exactly one waiter, first come, first served.
   * Every caller must agree on the number while the lease is in use: another number, or an exclusive or shared
   * request while permits are held, gets {@linkcode LeaseKindError}. Integer from 1 to 1000000; not with `shared`,
   * nor on a Redlock group (a majority per permit does not bound the holders: `TypeError`).
   * @default {undefined}
   * @example At most 4 concurrent calls to an upstream, across every process
   * ```ts
   * await withLock(client, "upstream:geo", (signal) => callUpstream({ signal }), { permits: 4 });
   * ```
   */
  readonly permits?: number;
  /**
   * How many of the `permits` this hold takes at once (a weighted semaphore, as Go's `semaphore.Weighted`): all of
   * them in one step or none, one fence for the hold, and a release or expiry frees exactly that many. Holds of any
   * weights share one lease (the sum of their weights never exceeds `permits`). Waiting stays first come, first
   * served, strictly: a waiter is granted only once every earlier waiter has been and its weight fits, so a heavy
   * request is never starved by a stream of light ones (they queue behind it). A re-entry (the same owner again)
   * takes no more permits and must ask the weight it holds, else {@linkcode LeaseKindError} `why` "weight". Integer
   * from 1 to `permits`; only with `permits` (else `TypeError`), so not on a Redlock group. See docs/permits.md.
   * @default {1}
   * @example A heavy export takes 3 of the 10 slots of a shared upstream, a light call 1
   * ```ts
   * await withLock(client, "upstream:geo", (signal) => exportAll({ signal }), { permits: 10, weight: 3 });
   * ```
   */
  readonly weight?: number;
  /**
   * Fixed lease in ms: Redis expires the lease after this long, no renewal, and `lease.signal` aborts at the
   * local deadline. When omitted, the lease is in watchdog mode (see `watchdogMs`).
   * Integer from 1 to 2147483647.
   * @default {undefined}
   */
  readonly leaseMs?: number;
  /**
   * Watchdog mode (no `leaseMs`): the lease TTL, renewed every third of it while held, so a holder that dies
   * frees the lease within this time. Integer from 30 to 2147483647.
   * @default {30000}
   */
  readonly watchdogMs?: number;
  /**
   * How long to wait for a held lease, in ms. `0` makes a single attempt; `Infinity` waits until `signal`
   * aborts. Waiting is queued (first come, first served) and woken by the release itself, not by polling. When it
   * runs out with the lease held by others, the call rejects with {@linkcode LockTimeoutError}; when Redis stops
   * answering meanwhile, with {@linkcode RedisTimeoutError} by `waitMs` + 250 ms (an outage wins over "held").
   * @default {10000}
   */
  readonly waitMs?: number;
  /**
   * Cancels the wait: `acquire` rejects with `signal.reason` and leaves nothing behind in Redis. An already
   * aborted signal rejects before any Redis command. It does not affect a lease once held.
   * @default {undefined}
   */
  readonly signal?: AbortSignal;
  /**
   * Reentrancy: acquiring with the same owner while it holds the lease adds a hold (Redisson-style count)
   * instead of waiting. A string (1 to 512 characters) or a `Lease`, whose owner is reused as it is. An owner
   * string counts on this client only (Redisson scopes a thread id to its client the same way): another process, or
   * another client, using the same string is another owner. To share a hold across processes, pass `lease.token`
   * to {@linkcode resume}.
   * @default {a unique id per call (a random prefix per process and a counter)}
   */
  readonly owner?: string | Lease;
  /**
   * Who holds the lease, for people: {@linkcode inspect} reports it as `owners[].label` (and `redlease inspect` in
   * its HOLDER column), e.g. the host, process and job. It costs no Redis command, key or script: it travels in the
   * owner string, which every record keeps anyway, as `<id> <label>` (so `lease.owner` ends with it, and a token
   * carries it). 1 to 256 characters, without control characters (`RangeError`); not with `owner` (`TypeError`):
   * an owner string is shown as it is, and a Lease passed as `owner` keeps its own label.
   * @default {undefined}
   * @example Say which process holds a lease
   * ```ts
   * await using lease = await acquire(client, "reports", { label: "web-3 pid=4242 nightly-report" });
   * const info = await inspect(client, "reports");
   * console.log(info.owners.map((o) => o.label)); // [ "web-3 pid=4242 nightly-report" ]
   * ```
   */
  readonly label?: string;
  /**
   * Require replication: after each lease write (acquire, watchdog renewal, extend) send `WAIT replicas
   * replicaTimeoutMs` on the same connection, and count the write only if that many replicas acknowledged it.
   * An acquire that is not acknowledged in time is undone and rejects with {@linkcode ReplicationError}. This is
   * how a lease survives a failover to a replica (as Redisson's `WAIT`); see docs/topologies.md.
   * Integer from 0 (off) to 100.
   * @default {0}
   */
  readonly replicas?: number;
  /**
   * How long `WAIT` may block for the `replicas` acknowledgements, in ms. Integer from 1 to 60000.
   * @default {1000}
   */
  readonly replicaTimeoutMs?: number;
  /**
   * The claim window, in ms. When a release hands the lease to this waiter, the grant is this waiter's at once
   * (no extra round trip), but it must be claimed within this window, or it passes to the next live waiter: a
   * waiter that died, is partitioned or never heard the message cannot strand the lease for longer. redlease
   * claims it in the background (unless the lease is released first), and while queued re-checks the queue this
   * often, so a free lease with live waiters is never idle longer than about this after any single fault.
   * Integer from 10 to 60000.
   * @default {1000}
   */
  readonly claimMs?: number;
  /**
   * Lock delay, in ms (as Chubby's and Consul's): when this hold ends without a release — its lease expired, or
   * was lost (the watchdog could not renew it, the holder died or paused) — the lease (for a shared hold or a
   * permit: its share or permit) is granted to nobody until this long after it expired, for resources that cannot
   * check a fence: a holder that vanished may still be writing for a while. A release (also `withLock`'s) ends
   * the hold at once, with no delay; so does {@linkcode forceUnlock} (an operator's word ends a delay too). During
   * the delay the hold is dead for its holder as after any expiry (no renewal, extend, release or re-entry; its
   * `signal` aborts at its deadline as always), acquirers get `LockTimeoutError` or wait — queued waiters keep
   * their places and are granted in order when the delay ends — and {@linkcode inspect} lists the hold in
   * `delayed`; for the kind checks it still counts as held (another kind gets {@linkcode LeaseKindError}). The delay
   * is the hold's own, set by the acquire that took it (a re-entry keeps it); acquirers may pass different delays. It only narrows the window in which a stale holder can interfere; fencing
   * (`lease.fence`) is still the guarantee. Integer from 0 (off) to 2147483647.
   * @default {0}
   * @example A job on a store that cannot check a token: after a crash, wait 5 s before anyone takes over
   * ```ts
   * await using lease = await acquire(client, "legacy-ftp", { lockDelayMs: 5_000 });
   * ```
   */
  readonly lockDelayMs?: number;
  /**
   * Redlock only (a group from `redlock()`): how long one node may take to answer before it counts as failed for that
   * attempt. Time this process spends busy (a GC pause, synchronous work) past it does not count: a reply that came
   * meanwhile counts, and the node then gets this long again; the lease's validity still counts all the time that
   * passed. Keep it well below the lease. Integer from 1 to the lease.
   * @default {the lease / 200, between 5 and 50 ms (50 ms for the 30 s watchdog lease)}
   */
  readonly nodeTimeoutMs?: number;
  /**
   * Redlock only: the mean delay between attempts while the lease is held elsewhere; each delay is randomised
   * between half and one and a half times this, so competing clients do not retry in lockstep. Integer from 1
   * to 60000.
   * @default {100}
   */
  readonly retryDelayMs?: number;
}
