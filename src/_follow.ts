// The engine of observe() and watch(): follow something in Redis by reading it again whenever a message on its
// channels says it changed, when a time it read runs out, at a heartbeat, and once the subscriber connection is back
// from a drop (the messages sent meanwhile were lost). Without pub/sub (the HTTP driver) it reads at the heartbeat.
import type { ClientState } from "./_client.ts";
import { bounded } from "./_connection.ts";
import { DEFAULT_CALL_TIMEOUT_MS } from "./_defaults.ts";
import { nap } from "./_timers.ts";
import type { Bound } from "./_types.ts";

/** What one follower reads and reports (see follow()). */
export interface Follower<R, S, E> {
  /** The channel whose messages say that it changed. */
  readonly channel: string;
  /** Told each message, before the read it causes (optional). */
  told?(message: string): void;
  /**
   * More channels whose messages may tell a change, each with whether a message does (optional): subscribed with
   * the channel, where they can be; one that cannot (refused, unknown) leaves what it would tell to the heartbeat.
   */
  more?(): Promise<ReadonlyArray<readonly [channel: string, wakes: (message: string) => boolean]>>;
  /** Ms between reads at the latest: with pub/sub (`subscribed`), and without. */
  heartbeat(subscribed: boolean): number;
  /** One read, within `bound`. */
  read(bound: Bound, subscribed: boolean): Promise<R>;
  /**
   * What a read shows after `last` (undefined at first): the items to yield, the state to compare the next read
   * with, and the ms until the next read at the latest (a time the read says runs out).
   */
  step(reply: R, last: S | undefined, readAt: number): { out: E[]; last: S; ms: number };
}

/**
 * Follow `f` on the client at `state` until `signal` aborts (the iteration ends without an error) or the consumer
 * stops iterating; a read that fails (5 s per read) ends it with that error. Every wait is on the shared unref'd
 * timer: it never keeps a process alive.
 */
// Long: the subscription, the read loop and the teardown share the listener and its wake-up; each part is short.
export async function* follow<R, S, E>(
  state: ClientState,
  name: string,
  signal: AbortSignal | undefined,
  f: Follower<R, S, E>,
): AsyncGenerator<E> {
  const driver = state.driver, channel = f.channel;
  let told = false;
  let wake: (() => void) | undefined;
  const listener = (message?: string) => {
    if (message !== undefined) f.told?.(message);
    told = true;
    wake?.();
  };
  let subscribing: Promise<void> | undefined;
  // The channels of f.more() subscribed (or being subscribed), with their listeners.
  const more: Array<Promise<readonly [string, (message: string) => void] | undefined>> = [];
  let ended = false;
  const bound = () => ({ until: performance.now() + DEFAULT_CALL_TIMEOUT_MS, signal, name });
  // Messages sent while the subscriber connection was down are lost: read again once it is back.
  const again = () => listener();
  state.resubscribed.add(again);
  try {
    if (driver.subscribe && !signal?.aborted) {
      subscribing = driver.subscribe(channel, listener);
      const extra = (f.more?.() ?? Promise.resolve([])).then((list) =>
        Promise.all(list.map(([ch, wakes]) => {
          if (ended) return;
          const l = (message: string) => void (wakes(message) && listener());
          const sub = driver.subscribe!(ch, l).then(() => [ch, l] as const, () => undefined);
          more.push(sub);
          return sub;
        }))
      ).catch(() => {});
      await bounded(Promise.all([subscribing, extra]), bound());
    }
    const subscribed = subscribing !== undefined;
    const heartbeat = f.heartbeat(subscribed);
    let last: S | undefined;
    while (!signal?.aborted) {
      told = false;
      const readAt = performance.now();
      const next = f.step(await f.read(bound(), subscribed), last, readAt);
      last = next.last;
      for (const item of next.out) yield item;
      // Until a message, a time the read said runs out, or the heartbeat.
      if (!told) await nap(Math.min(heartbeat, next.ms), signal, (wakeUp) => (wake = wakeUp));
      wake = undefined;
    }
  } catch (e) {
    if (signal?.aborted) return;
    throw e;
  } finally {
    ended = true;
    state.resubscribed.delete(again);
    // Unsubscribe once subscribed, even if the wait for it was given up (it may still complete).
    if (subscribing) {
      const all = [
        subscribing.then(() => driver.unsubscribe?.(channel, listener)),
        ...more.map((sub) => sub.then((s) => s && driver.unsubscribe?.(...s))),
      ];
      await bounded(Promise.all(all), bound()).catch(() => {});
    }
  }
}
