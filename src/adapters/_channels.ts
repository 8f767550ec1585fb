// The channel registry of the ioredis and Bun adapters, which used to carry a copy each: both multiplex every
// waiter of a client over one subscriber connection. Plain functions over a Map, so that each adapter's bundle
// stays small. (node-redis keeps per-channel listeners itself and needs none of this.)

type Listener = (message: string) => void;

/**
 * Per-channel listener sets over one subscriber connection, keyed by the channels subscribed or subscribing: the
 * first listener of a channel subscribes, the last one unsubscribes, and all of them wait for its one SUBSCRIBE.
 */
export type Channels = Map<string, {
  readonly listeners: Set<Listener>;
  /** The channel's SUBSCRIBE. */
  readonly ready: Promise<unknown>;
  /** Delivers a message to the listeners. */
  readonly to: Listener;
}>;

/** A `(channel, message)` handler for connections that report every message with its channel. */
export function dispatcher(channels: Channels): (channel: string, message: string) => void {
  return (channel, message) => channels.get(channel)?.to(message);
}

/**
 * Add `listener` to `channel`, calling `subscribe` if it is the first; resolves once subscribed. `subscribe` gets
 * the channel's delivery function, for connections that take a callback per channel. A failed SUBSCRIBE forgets
 * the channel, so that the next listener tries again.
 */
export async function listen(
  channels: Channels,
  channel: string,
  listener: Listener,
  subscribe: (to: Listener) => Promise<unknown>,
): Promise<void> {
  let entry = channels.get(channel);
  if (!entry) {
    const listeners = new Set<Listener>();
    const to = (message: string) => {
      for (const l of [...listeners]) l(message);
    };
    const created = { listeners, to, ready: subscribe(to) };
    channels.set(channel, entry = created);
    created.ready.catch(() => {
      if (channels.get(channel) === created) channels.delete(channel);
    });
  }
  entry.listeners.add(listener);
  await entry.ready;
}

/** Remove `listener` from `channel`; if it was the last, call `unsubscribe` once the SUBSCRIBE has succeeded. */
export async function unlisten(
  channels: Channels,
  channel: string,
  listener: Listener,
  unsubscribe: () => Promise<unknown>,
): Promise<void> {
  const entry = channels.get(channel);
  if (!entry || !entry.listeners.delete(listener) || entry.listeners.size > 0) return;
  channels.delete(channel);
  await entry.ready.then(unsubscribe, () => {});
}
