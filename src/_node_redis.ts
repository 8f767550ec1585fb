// A Driver over node-redis clients (v4 and v5): standalone, cluster and sentinel, recognised by shape so that
// no node-redis code is imported.
import type { Driver } from "./driver.ts";
import { slotOf } from "./adapters/_slot.ts";
import { unrefTimeout } from "./_timers.ts";
import { watchErrors } from "./adapters/_watch.ts";

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
  masters: Array<{ client?: { isReady?: boolean } }>;
  /** slot → its shard, as the client last learnt it. */
  slots?: ArrayLike<{ master: unknown } | undefined>;
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

function has(value: unknown, ...names: string[]): boolean {
  return typeof value === "object" && value !== null &&
    names.every((name) => typeof (value as Record<string, Fn>)[name] === "function");
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
export function nodeRedisDriver(client: unknown): Driver {
  const driver = has(client, "sSubscribe", "nodeClient") && Array.isArray((client as Cluster).masters)
    ? clusterDriver(client as Cluster)
    : has(client, "getMasterNode", "sendCommand", "subscribe")
    ? sentinelDriver(client as Sentinel)
    : standaloneDriver(client as Standalone);
  const lastError = watchErrors(client);
  return lastError ? { ...driver, lastError } : driver;
}

// Long: one closure per driver method over the same cluster client and its subscriptions; each method is short.
function clusterDriver(cluster: Cluster): Driver {
  // channel → its listeners. node-redis drops the sharded subscriptions of a master that rediscovery drops (a dead
  // one): after each rediscovery they are subscribed again (no command where still subscribed), on the new
  // master, and waiters re-check for what they missed.
  const subs = new Map<string, Set<Listener>>();
  let resubscribed: (() => void) | undefined;
  const forget = (ch: string, l: Listener) => {
    const listeners = subs.get(ch);
    if (listeners?.delete(l) && !listeners.size) subs.delete(ch);
  };
  const send = rediscovering(cluster, () => {
    const again = [...subs].flatMap(([ch, listeners]) =>
      [...listeners].map((l) =>
        cluster.sSubscribe(ch, l).then(() => {
          if (!subs.get(ch)?.has(l)) return cluster.sUnsubscribe(ch, l); // unsubscribed meanwhile
        })
      )
    );
    if (again.length) Promise.allSettled(again).then(() => resubscribed?.());
  });
  return {
    sharded: true,
    // EVAL (after NOSCRIPT) goes to the master of keys[0], and caches the script there: lazily, per master.
    ...evals((keys, command) => send(keys[0], command)),
    // (redlease uses evalSource; a driver built on this one without it loads here.) Every master: a slot may move
    // (MOVED/ASK) to a master that has never seen the script.
    loadScript: async (source) => {
      const shas = await Promise.all(
        cluster.masters.map(async (master) =>
          (await cluster.nodeClient(master)).sendCommand(["SCRIPT", "LOAD", source])
        ),
      );
      return String(shas[0]);
    },
    // (Not watched: WAIT may block for longer than a sweep.)
    command: (key, args) => cluster.sendCommand(key, false, [...args]),
    subscribe: async (ch, l) => {
      let listeners = subs.get(ch);
      if (!listeners) subs.set(ch, listeners = new Set());
      listeners.add(l);
      try {
        await cluster.sSubscribe(ch, l);
      } catch (e) {
        forget(ch, l);
        throw e;
      }
    },
    unsubscribe: async (ch, l) => {
      forget(ch, l);
      await cluster.sUnsubscribe(ch, l);
    },
    onResubscribed: (fn) => void (resubscribed = fn),
    // Queued for a master that rediscovery dropped (see rediscovering): never sent, so sent again.
    unsent: (e) => (e as Error)?.message === "Disconnects client",
  };
}

function sentinelDriver(sentinel: Sentinel): Driver {
  let resubscribed: (() => void) | undefined;
  let subscribed = 0;
  // On a failover node-redis moves the pub/sub connection to the new master by itself, and a message published
  // before it has subscribed there again is lost. A probe subscription queues behind that move: once it is
  // confirmed the channels are back, and waiters and observers re-check.
  const probe = `redlease:probe:${crypto.randomUUID()}`;
  const none = () => {};
  sentinel.on?.("topology-change", (e) => {
    if (e?.type !== "MASTER_CHANGE" || subscribed <= 0 || !resubscribed) return;
    sentinel.subscribe(probe, none).then(() => {
      resubscribed?.();
      return sentinel.unsubscribe(probe, none);
    }).catch(() => {});
  });
  return {
    ...evals((_keys, command) => sentinel.sendCommand(false, command)),
    loadScript: async (source) => String(await sentinel.sendCommand(false, ["SCRIPT", "LOAD", source])),
    command: (_key, args) => sentinel.sendCommand(false, [...args]),
    subscribe: async (ch, l) => {
      await sentinel.subscribe(ch, l);
      subscribed++;
    },
    unsubscribe: async (ch, l) => {
      subscribed--;
      await sentinel.unsubscribe(ch, l);
    },
    onResubscribed: (fn) => void (resubscribed = fn),
  };
}

function standaloneDriver(client: Standalone): Driver {
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

/** How often stuck calls are looked for, and the least time between two rediscoveries, ms. */
const SWEEP_MS = 250;
const REDISCOVER_MS = 500;
/** An ASK redirection to a node no client knows: node-redis rediscovers the slots, then fails the command. */
const ASK_NOWHERE = ["EVAL", "return redis.error_reply('ASK 0 redlease:rediscover')", "0"];

/**
 * `sendCommand` routed by a key, which also asks the cluster client to rediscover its slots (at most every
 * REDISCOVER_MS) when a command fails other than by a script's error, or waits longer than SWEEP_MS for its reply.
 * node-redis (v4 and v5) learns the topology only from MOVED/ASK redirections: after a master dies nothing
 * redirects it, and it would queue the commands for that master's slots until the master is back, never seeing its
 * promoted replica. Neither version has a public way to rediscover, so this answers a command with an ASK to a node
 * it cannot know (a script that returns that error), sent to a master that is up: node-redis then rediscovers the
 * slots from that master (CLUSTER SLOTS), drops the dead master's connection, and rejects what was queued for it
 * with "Disconnects client" — never sent, so redlease sends it again (see `unsent`) while its caller waits. Then
 * `rediscovered` is called.
 */
function rediscovering(
  cluster: Cluster,
  rediscovered: () => void,
): (key: string | undefined, args: string[]) => Promise<unknown> {
  let epoch = 0, young = 0, old = 0, last = -Infinity, sweeping = false;
  const rediscover = (): void => {
    const now = performance.now();
    const slots = cluster.slots;
    if (now - last < REDISCOVER_MS || !slots) return;
    last = now;
    const up = cluster.masters.filter((master) => master.client?.isReady === true);
    const master = up[Math.floor(Math.random() * up.length)];
    if (!master) return;
    // A key of one of that master's slots (a few CRC16s: a master serves a fair share of the slots).
    for (let i = 0; i < 1_000; i++) {
      const key = `{redlease:${i}}`;
      if (slots[slotOf(key)]?.master === master) {
        return void cluster.sendCommand(key, false, ASK_NOWHERE).catch(rediscovered);
      }
    }
  };
  // Every SWEEP_MS while calls are pending: calls older than a sweep that still wait are stuck (queued for a master
  // that is down, or lost to a dead connection).
  const sweep = (): void => {
    if (old > 0) rediscover();
    old += young;
    young = 0;
    epoch++;
    sweeping = old > 0;
    if (sweeping) unrefTimeout(sweep, SWEEP_MS);
  };
  return (key, args) => {
    const sentIn = epoch;
    young++;
    if (!sweeping) {
      sweeping = true;
      unrefTimeout(sweep, SWEEP_MS);
    }
    const reply = cluster.sendCommand(key, false, args);
    const done = () => void (sentIn === epoch ? young-- : old--);
    reply.then(done, (error) => {
      done();
      if (!/^(NOSCRIPT|TRYAGAIN|ERR) /.test((error as Error)?.message)) rediscover();
    });
    return reply;
  };
}
