// A Driver over node-redis clients (v4 and v5): standalone, cluster and sentinel, recognised by shape so that
// no node-redis code is imported.
import type { Driver } from "./driver.ts";

type Listener = (message: string) => void;
type Fn = (...args: never[]) => unknown;

interface Standalone {
  sendCommand(args: string[]): Promise<unknown>;
  duplicate(): Standalone;
  connect(): Promise<unknown>;
  disconnect(): Promise<unknown>;
  subscribe(channel: string, listener: Listener): Promise<unknown>;
  unsubscribe(channel: string, listener: Listener): Promise<unknown>;
  on(event: string, fn: () => void): unknown;
  off?(event: string, fn: () => void): unknown;
}

interface Cluster {
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
  sSubscribe(channel: string, listener: Listener): Promise<unknown>;
  sUnsubscribe(channel: string, listener: Listener): Promise<unknown>;
  masters: Array<unknown>;
  nodeClient(node: unknown):
    | { sendCommand(args: string[]): Promise<unknown> }
    | Promise<{
      sendCommand(args: string[]): Promise<unknown>;
    }>;
}

interface Sentinel {
  sendCommand(isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
  subscribe(channel: string, listener: Listener): Promise<unknown>;
  unsubscribe(channel: string, listener: Listener): Promise<unknown>;
  getMasterNode(): unknown;
  on?(event: "topology-change", fn: (e: { type?: string }) => void): unknown;
}

function has(c: unknown, ...names: string[]): boolean {
  return typeof c === "object" && c !== null && names.every((n) => typeof (c as Record<string, Fn>)[n] === "function");
}

/** Whether `c` looks like a node-redis client of any kind. */
export function isNodeRedis(c: unknown): boolean {
  // ioredis also has sendCommand and duplicate, but node-redis has neither evalsha nor call.
  return has(c, "sendCommand") && (has(c, "duplicate") || has(c, "getMasterNode")) && !has(c, "evalsha", "call");
}

/** `evalScript` (EVALSHA) and `evalSource` (EVAL), both sent by `send` (which routes by `keys[0]` on a cluster). */
function evals(send: (keys: readonly string[], command: string[]) => Promise<unknown>) {
  const to = (cmd: string) => (script: string, keys: readonly string[], args: readonly string[]) =>
    send(keys, [cmd, script, String(keys.length), ...keys, ...args]);
  return { evalScript: to("EVALSHA"), evalSource: to("EVAL") };
}

/** Wrap a node-redis v4/v5 standalone, cluster or sentinel client. */
export function nodeRedisDriver(c: unknown): Driver {
  if (has(c, "sSubscribe", "nodeClient") && Array.isArray((c as Cluster).masters)) {
    const cl = c as Cluster;
    return {
      sharded: true,
      // EVAL (after NOSCRIPT) goes to the master of keys[0], and caches the script there: lazily, per master.
      ...evals((keys, command) => cl.sendCommand(keys[0], false, command)),
      // (redlease uses evalSource; a driver built on this one without it loads here.) Every master: a slot may move
      // (MOVED/ASK) to a master that has never seen the script.
      loadScript: async (source) => {
        const shas = await Promise.all(
          cl.masters.map(async (m) => (await cl.nodeClient(m)).sendCommand(["SCRIPT", "LOAD", source])),
        );
        return String(shas[0]);
      },
      command: (key, args) => cl.sendCommand(key, false, [...args]),
      subscribe: async (ch, l) => void await cl.sSubscribe(ch, l),
      unsubscribe: async (ch, l) => void await cl.sUnsubscribe(ch, l),
    };
  }
  if (has(c, "getMasterNode", "sendCommand", "subscribe")) {
    const s = c as Sentinel;
    let resubscribed: (() => void) | undefined;
    let subscribed = 0;
    // On a failover node-redis moves the pub/sub connection to the new master by itself, and a message published
    // before it has subscribed there again is lost. A probe subscription queues behind that move: once it is
    // confirmed the channels are back, and waiters and observers re-check.
    const probe = `redlease:probe:${crypto.randomUUID()}`;
    const none = () => {};
    s.on?.("topology-change", (e) => {
      if (e?.type !== "MASTER_CHANGE" || subscribed <= 0 || !resubscribed) return;
      s.subscribe(probe, none).then(() => {
        resubscribed?.();
        return s.unsubscribe(probe, none);
      }).catch(() => {});
    });
    return {
      ...evals((_keys, command) => s.sendCommand(false, command)),
      loadScript: async (source) => String(await s.sendCommand(false, ["SCRIPT", "LOAD", source])),
      command: (_key, args) => s.sendCommand(false, [...args]),
      subscribe: async (ch, l) => {
        await s.subscribe(ch, l);
        subscribed++;
      },
      unsubscribe: async (ch, l) => {
        subscribed--;
        await s.unsubscribe(ch, l);
      },
      onResubscribed: (fn) => void (resubscribed = fn),
    };
  }
  const client = c as Standalone;
  let sub: Promise<Standalone> | undefined;
  let resubscribed: (() => void) | undefined;
  const subscriber = () =>
    sub ??= (async () => {
      const conn = client.duplicate();
      // Socket errors while reconnecting land here; waiters fall back to their bounded sleeps.
      conn.on("error", () => {});
      const close = () => {
        sub = undefined;
        client.off?.("end", close);
        conn.disconnect().catch(() => {});
      };
      try {
        await conn.connect();
      } catch (e) {
        sub = undefined;
        throw e;
      }
      // The subscriber lives and dies with the caller's client, so closing that client lets the process exit.
      client.on("end", close);
      // "ready" after the first connect means it reconnected (node-redis re-subscribes its channels itself).
      conn.on("ready", () => resubscribed?.());
      return conn;
    })();
  return {
    ...evals((_keys, command) => client.sendCommand(command)),
    loadScript: async (source) => String(await client.sendCommand(["SCRIPT", "LOAD", source])),
    command: (_key, args) => client.sendCommand([...args]),
    subscribe: async (ch, l) => void await (await subscriber()).subscribe(ch, l),
    unsubscribe: async (ch, l) => {
      if (sub) await (await sub).unsubscribe(ch, l);
    },
    onResubscribed: (fn) => void (resubscribed = fn),
  };
}
