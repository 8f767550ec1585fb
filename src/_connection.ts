// A client's connection to one Redis, as redlease uses it: running scripts (EVALSHA, the text sent once after
// NOSCRIPT, commands Redis did not run sent again) within a bound, and listening on waiter channels over the driver's
// pub/sub. It knows scripts, keys and channels, never what a lease is: the holds of a client are ClientState's
// (_client.ts), and what the scripts mean is _protocol.ts's.
import type { Bound, LeaseKeys, Logger } from "./_types.ts";
import { PAUSE_GRACE_MS } from "./_defaults.ts";
import { log } from "./_log.ts";
import type { Script } from "./_scripts.ts";
import { asUnavailable, channelOf, parseMessage, type ScriptRunner, type WaiterMessage } from "./_protocol.ts";
import { RedisTimeoutError } from "./errors.ts";
import { afterMicrotasks, cancel, type Due, enqueue, type Timer, unrefTimeout } from "./_timers.ts";
import type { Driver } from "./driver.ts";

/**
 * Settle as `pending` does, or reject when the bound passes (RedisTimeoutError) or its signal aborts (its reason),
 * whichever comes first. A bound passes only once the process has been looking for the reply until then: a reply
 * that came while it was busy (a pause that spans the bound) counts (see schedule()'s `patience`); `abort` (when given) is aborted too, so an abortable driver stops waiting as well.
 * `decode` maps the value inside the same step (a throw rejects): a script call is one promise from the driver's
 * reply to the caller's value (see ScriptCall, which may also turn a rejection into another attempt).
 */
export function bounded<T, R = T>(
  pending: Promise<T>,
  bound: Bound | undefined,
  abort?: AbortController,
  decode?: (value: T) => R,
): Promise<R> {
  return new Bounded<T, R>(bound, abort, decode).wait(pending);
}

/** Where `capture` leaves the resolving functions of the promise it was given, for its caller to take at once. */
let resolveNext: (value: never) => void = () => {}, rejectNext: (reason: unknown) => void = () => {};
/** A promise executor shared by every call: a closure per call to keep its resolving functions costs more. */
const capture = (resolve: (value: never) => void, reject: (reason: unknown) => void): void => {
  resolveNext = resolve;
  rejectNext = reject;
};
const ignore = () => {};

/**
 * One call within a bound (see bounded()). It is its own settle state, its own entry on the shared timer (a Due,
 * whose `fn` is its timeout) and its own abort listener (`handleEvent`): a call costs this object, its promise and
 * the two callbacks that take the driver's outcome, where closures per call cost several times that, and more when
 * they live across a round trip (64 calls in flight survive scavenges).
 */
class Bounded<T, R> implements Due {
  // (Fields declared, and set in the constructor in one order: initializers would define each field once more.)
  // Its entry on the shared timer (see Due): due when the bound passes, unless it settles first.
  declare at: number;
  declare i: number;
  /** (Set only where timers are not shared: see Due.) */
  declare t?: Timer;
  declare patience: number;
  declare waits: number;
  /** Set once settled: the caller gave up or has its outcome, and nothing may be sent for it any more. */
  declare over: boolean;
  declare readonly bound: Bound | undefined;
  declare readonly abort: AbortController | undefined;
  declare readonly decode: ((value: T) => R) | undefined;
  declare resolve: (value: R) => void;
  declare reject: (reason: unknown) => void;
  /** The bound from the start, ms (what a timeout says). */
  declare ms: number;

  constructor(bound: Bound | undefined, abort: AbortController | undefined, decode: ((value: T) => R) | undefined) {
    this.at = Infinity;
    this.i = -1;
    this.patience = 0;
    this.waits = 0;
    this.over = false;
    this.bound = bound;
    this.abort = abort;
    this.decode = decode;
    this.resolve = this.reject = ignore; // (wait() sets them)
    this.ms = 0;
  }

  /** Settle as `pending` does, within the bound: the caller's promise. */
  wait(pending: Promise<T>): Promise<R> {
    const promise = new Promise<R>(capture);
    this.resolve = resolveNext as (value: R) => void;
    this.reject = rejectNext;
    const bound = this.bound, signal = bound?.signal;
    if (signal?.aborted) {
      pending.then(undefined, ignore); // sent already: its failure is nobody's now, and must not go unhandled
      this.handleEvent();
      return promise;
    }
    if (bound && bound.until !== Infinity) {
      const ms = this.ms = Math.max(0, Math.round(bound.until - performance.now()));
      // On the shared timer: nearly every call settles long before its bound, and then costs no timer of its own.
      // Patient: a reply that came while the process was busy past the bound is read before it counts as none, and
      // a command the pause kept from going out gets a round trip (no more than its whole bound).
      this.at = bound.until;
      this.patience = Math.max(1, Math.min(ms, PAUSE_GRACE_MS));
      enqueue(this);
    }
    signal?.addEventListener("abort", this, { once: true });
    pending.then((value) => this.settle(false, value), (e) => this.rejected(e));
    return promise;
  }

  /** The pending call failed with `e`: the call fails (a ScriptCall may try again first). */
  rejected(e: unknown): void {
    this.settle(true, e);
  }

  /** The shared timer's call: the bound passed without a reply. */
  fn(): void {
    this.settle(true, new RedisTimeoutError(this.bound!.name, this.ms));
  }

  /** The bound's signal aborted (an EventListener object: no closure per call). */
  handleEvent(): void {
    this.settle(true, this.bound!.signal!.reason);
  }

  settle(failed: boolean, value: unknown): void {
    this.over = true;
    cancel(this);
    this.bound?.signal?.removeEventListener("abort", this);
    if (failed) {
      this.abort?.abort(value);
      return this.reject(value);
    }
    try {
      const decode = this.decode;
      this.resolve(decode ? decode(value as T) : value as R);
    } catch (e) {
      this.reject(e);
    }
  }
}

function errorCode(e: unknown): string {
  return e instanceof Error ? e.message.slice(0, e.message.indexOf(" ") >>> 0) : "";
}

interface Channel {
  /** Its name (see channelOf). */
  readonly channel: string;
  /** Attempt id → its waiter; and "" → a no-op, so that the Map never empties (see listen()). */
  readonly waiters: Map<string, (message: WaiterMessage) => void>;
  readonly listener: (message: string) => void;
  readonly ready: Promise<void>;
  /** Waiters plus holds that came through the queue: the subscription is kept while any remain. */
  refs: number;
  /** Set once `ready` has resolved. */
  up: boolean;
  /** Set while relisten() subscribes it again; and when it last did (performance.now() clock). */
  relistening?: boolean;
  relistenedAt?: number;
}

/**
 * One script call (see Connection#run): a bounded call that sends its script and, when that fails, sends it again
 * where it can (see `send`).
 */
class ScriptCall<R> extends Bounded<unknown, R> {
  // (Declared and set in the constructor, as Bounded's.)
  declare readonly driver: Driver;
  /** Its connection's sends of script texts (see Connection#sent). */
  declare readonly sent: Map<string, Promise<unknown>>;
  declare readonly script: Script;
  declare readonly keys: readonly string[];
  declare readonly args: string[];
  /** The send of the script's text known when the latest EVALSHA left. */
  declare seen: Promise<unknown> | undefined;
  /** When its first failure came: the time left from then is what a timeout's message reports. */
  declare failedAt: number | undefined;
  /** Its latest failure (one it sent again after): the cause of a timeout, when the client tells of none. */
  declare failure: unknown;
  declare tries: number;
  /** How many times it waited for another call's send of the script's text. */
  declare textWaits: number;
  /** Whether this call sends the script's text. */
  declare own: boolean;

  // Long: one field per argument, as a constructor is.
  constructor(
    driver: Driver,
    sent: Map<string, Promise<unknown>>,
    script: Script,
    keys: readonly string[],
    args: string[],
    bound: Bound | undefined,
    abort: AbortController | undefined,
    decode: ((reply: unknown) => R) | undefined,
  ) {
    super(bound, abort, decode);
    this.driver = driver;
    this.sent = sent;
    this.script = script;
    this.keys = keys;
    this.args = args;
    this.seen = undefined;
    this.failedAt = undefined;
    this.failure = undefined;
    this.tries = 0;
    this.textWaits = 0;
    this.own = false;
  }

  /**
   * A failed call fails as an outage (see asUnavailable: a timeout carries the client's last error as its cause, else
   * the failure it was sending again after), unless its signal aborted (its reason) or Redis answered with an error.
   */
  override settle(failed: boolean, value: unknown): void {
    const bound = this.bound;
    if (failed && !bound?.signal?.aborted) {
      value = asUnavailable(value, bound?.name ?? "", this.driver.lastError?.() ?? this.failure);
    }
    super.settle(failed, value);
  }

  /** Sent again where it can be (see `send`), else it fails: only a failed call pays for its recovery. */
  override rejected(e: unknown): void {
    this.retry(e).then((value) => this.settle(false, value), (failure) => this.settle(true, failure));
  }

  /**
   * EVALSHA; what follows its failure is `retry`. After NOSCRIPT (a server that never ran the script, a flush,
   * restart or failover, a slot moved to another master) the script's text is sent, lazily and once: EVAL
   * (`evalSource`), which runs this call and leaves the script cached, or else SCRIPT LOAD and EVALSHA again. When
   * another call started sending the text after this call's EVALSHA left (the NOSCRIPT may predate that send), this
   * call waits for that send to end and EVALSHAs again instead, so concurrent first calls send the text once. It
   * only waits, never takes that send's outcome: a send carrying another caller's signal can cost it a round trip
   * when aborted, never fail it. What Redis did not run is sent again while the caller waits: TRYAGAIN (a multi-key
   * command during a slot migration), CLUSTERDOWN (a cluster master failed and is not replaced yet), and what the
   * driver says never reached Redis (`unsent`: queued for a cluster node the client has since dropped).
   * Nothing is sent again once the caller has given up (bounded() timed out or its signal aborted): the caller's undo
   * may already be on its way, and a command sent after it would run after it. The call then fails as its bound
   * would have failed it.
   */
  send(): Promise<unknown> {
    this.seen = this.sent.get(this.script.sha);
    try {
      return this.driver.evalScript(this.script.sha, this.keys, this.args, this.abort?.signal);
    } catch (e) {
      return Promise.reject(e); // a driver that throws instead of rejecting fails the call the same way
    }
  }

  async retry(error: unknown): Promise<unknown> {
    const driver = this.driver,
      { script: { sha, source, name }, keys, args, bound } = this,
      signal = this.abort?.signal;
    // Given up once bounded() settled, not once the bound's time passed: a call whose bound passed while the process
    // was busy is still waited for (see bounded()), and its undo is sent only after it settles.
    const stop = () =>
      bound?.signal?.aborted
        ? bound.signal.reason
        : bound && this.over
        ? new RedisTimeoutError(bound.name, Math.round(bound.until - this.failedAt!))
        : undefined;
    this.failedAt ??= performance.now();
    this.failure = error;
    const again = () => {
      const stopped = stop();
      return stopped ? Promise.reject(stopped) : this.send().catch((failure) => this.retry(failure));
    };
    if (!this.own && errorCode(error) === "NOSCRIPT") {
      const last = this.sent.get(sha);
      if (last && last !== this.seen && this.textWaits++ < 8) return last.then(again);
      const stopped = stop();
      if (stopped) throw stopped;
      this.own = true;
      const text = driver.evalSource
        ? driver.evalSource(source, keys, args, signal)
        : driver.loadScript(source, keys[0], signal);
      this.sent.set(sha, text.catch(() => {}));
      try {
        const loaded = await text;
        if (driver.evalSource) return loaded;
        if (loaded !== sha) throw new Error(`SCRIPT LOAD of ${name} returned ${loaded}, expected ${sha}`);
        return again(); // loaded: a NOSCRIPT now fails the call
      } catch (failure) {
        this.own = false; // TRYAGAIN: neither run nor cached, start over; anything else is thrown below
        error = failure;
      }
    }
    // Not run: sent again while the caller waits (an unbounded call 100 times at most).
    const code = errorCode(error);
    const ms = code === "TRYAGAIN" || driver.unsent?.(error) ? 20 : code === "CLUSTERDOWN" ? 100 : 0;
    if (!ms || (this.tries++ >= 100 && !(bound && bound.until < Infinity)) || signal?.aborted) throw error;
    await sleep(ms);
    return again();
  }
}

/** Until configure() says otherwise: warnings to the console, as they are. */
const defaultLogger: Logger = { warn: (message) => console.warn(message) };

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One Redis as a client reaches it: scripts run within bounds, and waiter channels (see the module's comment). */
export class Connection implements ScriptRunner {
  /** Identifies this client's waiters in queues and names its grant channels. */
  readonly id: string = crypto.randomUUID().replaceAll("-", "");
  /** Run when the subscriber connection is back after a drop (messages may have been lost): observers re-read. */
  readonly resubscribed: Set<() => void> = new Set();
  /** The command release scripts notify waiters with. */
  readonly publish: string;
  /** Per script SHA1: the latest send of its text in full, settling (never rejecting) when that send ends. */
  #sent = new Map<string, Promise<unknown>>();
  /**
   * The waiter channels subscribed or being subscribed, keyed by their lease's key (`keys.hash`: one channel per
   * lease and client, and shorter to hash than the channel's name, which each record keeps for UNSUBSCRIBE).
   */
  #channels = new Map<string, Channel>();
  #checked = false;
  /** Where this client's messages go (see configure()). */
  logger: Logger | null = defaultLogger;

  constructor(readonly driver: Driver) {
    this.publish = driver.sharded ? "SPUBLISH" : "PUBLISH";
    driver.onResubscribed?.(() => {
      for (const fn of this.resubscribed) fn();
      for (const entry of this.#channels.values()) {
        for (const [attempt, fn] of entry.waiters) fn({ kind: "check", attempt });
      }
    });
  }

  /** Whether waiters can be woken by messages (else they poll). */
  get canListen(): boolean {
    return typeof this.driver.subscribe === "function";
  }

  /**
   * Run a script (see #send), bounded by `bound`, and `decode` its reply in the same step (the hot paths). The first call of a client is followed, never
   * preceded, by the eviction check: the first lease waits for no round trip but its own.
   */
  run<R = unknown>(
    script: Script,
    keys: readonly string[],
    args: string[],
    bound?: Bound,
    decode?: (reply: unknown) => R,
  ): Promise<R> {
    // Only an abortable driver (HTTP) gets a signal of its own: the others are bounded by the race alone.
    const abort = bound && this.driver.abortable ? new AbortController() : undefined;
    const call = new ScriptCall<R>(this.driver, this.#sent, script, keys, args, bound, abort, decode);
    const reply = call.wait(call.send());
    if (!this.#checked) this.#checkAfter(reply, keys[0]);
    return reply;
  }

  /**
   * The eviction check, a timer turn after the first call (its NOSCRIPT recovery included), so the caller has its
   * lease before INFO goes out. (Its own method: its closures would cost every run() a context.)
   */
  #checkAfter(reply: Promise<unknown>, key: string): void {
    this.#checked = true;
    const check = () => void unrefTimeout(() => void this.#checkEviction(key), 0);
    reply.then(check, check);
  }

  /**
   * Lease keys always carry a TTL, so `volatile-*` (and `allkeys-*`) eviction policies may evict them under
   * memory pressure and free a lease early. Warn once per client; the holder learns of such a loss at its next
   * renewal, like any other.
   */
  async #checkEviction(key: string): Promise<void> {
    try {
      const info = String(await this.driver.command?.(key, ["INFO", "memory"]) ?? "");
      // Warn on the policy even while maxmemory is 0: a limit can be set at run time (CONFIG SET), and a
      // lease evicted then is lost early.
      const policy = /maxmemory_policy:(\S+)/.exec(info)?.[1];
      if (policy && policy !== "noeviction") {
        log(
          this.logger,
          "warn",
          `redlease: maxmemory-policy ${policy} lets Redis evict a lease early; use noeviction`,
          { policy },
        );
      }
    } catch { /* INFO may be disabled (managed Redis): nothing to check */ }
  }

  /** The last error the client reported about its connection, if its driver tells (see Driver.lastError). */
  lastError(): unknown {
    return this.driver.lastError?.();
  }

  /** `WAIT replicas timeout` on the connection that wrote `key`; resolves the number of acknowledgements. */
  async waitReplicas(key: string, replicas: number, timeoutMs: number, bound: Bound): Promise<number> {
    if (!this.driver.command) throw new TypeError("Cannot wait for replicas as this client's driver has no 'command'");
    return Number(await bounded(this.driver.command(key, ["WAIT", String(replicas), String(timeoutMs)]), bound));
  }

  /**
   * Whether this client is subscribed to the waiter channel of the lease at `keys` (it has waited there recently):
   * wait without a plain try.
   */
  subscribed(keys: LeaseKeys): boolean {
    return this.#channels.size > 0 && this.#channels.has(keys.hash);
  }

  /**
   * Route the messages for attempt `wid` on the waiter channel of the lease at `keys` to `onMessage`. The first
   * waiter on a channel subscribes; a waiter listens once the subscription is up, so that it is listening before it
   * queues: returns the function that removes this waiter, at once when the channel is subscribed already (a
   * contended loop), else once it is.
   */
  listen(
    keys: LeaseKeys,
    wid: string,
    onMessage: (message: WaiterMessage) => void,
  ): (() => void) | Promise<() => void> {
    const key = keys.hash;
    let entry = this.#channels.get(key);
    if (!entry) {
      const channel = channelOf(keys, this.id);
      // (A sentinel entry, as in holdMap(): a Map emptied and filled again by every contended acquisition would be
      // shrunk and grown each time. No attempt id is empty.)
      const waiters = new Map<string, (message: WaiterMessage) => void>([["", () => {}]]);
      const listener = (text: string) => {
        const message = parseMessage(text);
        if (message) waiters.get(message.attempt)?.(message);
      };
      const created: Channel = entry = {
        channel,
        waiters,
        listener,
        ready: this.driver.subscribe!(channel, listener),
        refs: 0,
        up: false,
      };
      created.ready.then(() => void (created.up = true), () => {});
      this.#channels.set(key, entry);
    }
    const subscription = entry;
    subscription.waiters.set(wid, onMessage);
    const unref = this.retain(keys);
    const leave = () => {
      if (subscription.waiters.delete(wid)) unref();
    };
    return subscription.up ? leave : subscription.ready.then(() => leave, (e) => {
      if (this.#channels.get(key) === subscription) this.#channels.delete(key);
      subscription.waiters.delete(wid);
      throw e;
    });
  }

  /**
   * Subscribe the waiter channel of the lease at `keys` again, then have its waiters re-check (a message may have been
   * missed meanwhile): a waiter found its queue entry gone while it had heard no grant, dropped as dead because a
   * grant sent on the channel reached no subscriber of this client. Redis drops the sharded subscriptions of a slot that moves to another
   * master (and node-redis v4 does not make them again), so without this such a waiter would be dropped at every
   * handoff until its wait ran out. One at a time per channel; a channel dropped meanwhile is unsubscribed again.
   */
  relisten(keys: LeaseKeys): void {
    const key = keys.hash, entry = this.#channels.get(key), driver = this.driver, now = performance.now();
    // (At most once a second per channel: a subscription that was fine costs two commands, never a storm.)
    if (
      !entry || !entry.up || entry.relistening || !driver.unsubscribe || now - (entry.relistenedAt ?? -Infinity) < 1_000
    ) return;
    entry.relistening = true;
    entry.relistenedAt = now;
    driver.unsubscribe(entry.channel, entry.listener).catch(() => {})
      .then(() => driver.subscribe!(entry.channel, entry.listener))
      .then(() => {
        entry.relistening = false;
        if (this.#channels.get(key) !== entry) {
          return void driver.unsubscribe?.(entry.channel, entry.listener).catch(() => {});
        }
        for (const [attempt, fn] of entry.waiters) fn({ kind: "check", attempt });
      }, () => void (entry.relistening = false));
  }

  /**
   * Keep the waiter channel of the lease at `keys` subscribed until the returned function is called (once). When
   * the last reference goes, the subscription is dropped once the current microtasks have run, unless it is retained
   * again by then: a holder that releases and at once waits again (a contended loop) keeps its subscription instead
   * of paying UNSUBSCRIBE + SUBSCRIBE per acquisition. (Not a 0 ms timer: cleared, it would still wake the process
   * when due, one needless wake-up per contended acquisition.)
   */
  retain(keys: LeaseKeys): () => void {
    const key = keys.hash, entry = this.#channels.get(key)!;
    entry.refs++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--entry.refs > 0) return;
      afterMicrotasks(() => {
        if (entry.refs > 0 || this.#channels.get(key) !== entry) return;
        this.#channels.delete(key);
        entry.ready.then(() => this.driver.unsubscribe?.(entry.channel, entry.listener)).catch(() => {});
      });
    };
  }
}
