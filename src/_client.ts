// Per-client state: script loading with NOSCRIPT recovery, the shared subscriber connection, and the holds
// this client owns (one watchdog per held name and owner).
import { ALL_SCRIPTS, type Script } from "./_scripts.ts";
import type { Hold } from "./_hold.ts";

/**
 * The slice of a node-redis v4 client that redlease uses: `sendCommand` for scripts, and `duplicate` for the
 * one subscriber connection it opens (lazily, when a caller first waits) and closes with the client.
 *
 * @example
 * ```ts
 * import { createClient } from "redis";
 * const client = await createClient({ url: "redis://localhost:6379" }).connect(); // a NodeRedisLike
 * ```
 */
export interface NodeRedisLike {
  sendCommand(args: string[]): Promise<unknown>;
  duplicate(): NodeRedisLike;
  connect(): Promise<unknown>;
  disconnect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
  unsubscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
  on(event: string, fn: (...args: unknown[]) => void): unknown;
  off?(event: string, fn: (...args: unknown[]) => void): unknown;
}

export function isClient(c: unknown): c is NodeRedisLike {
  return typeof c === "object" && c !== null &&
    typeof (c as NodeRedisLike).sendCommand === "function" &&
    typeof (c as NodeRedisLike).duplicate === "function";
}

function isNoScript(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith("NOSCRIPT");
}

interface Channel {
  readonly waiters: Map<string, (fence: number) => void>;
  readonly listener: (message: string) => void;
  readonly ready: Promise<void>;
}

const states = new WeakMap<object, ClientState>();

export function stateOf(client: NodeRedisLike): ClientState {
  let st = states.get(client);
  if (!st) states.set(client, st = new ClientState(client));
  return st;
}

export class ClientState {
  /** Identifies this client's waiters in queues and names its grant channels. */
  readonly id: string = crypto.randomUUID().replaceAll("-", "");
  readonly holds: Map<string, Hold> = new Map();
  #ready = false;
  #loading: Promise<void> | undefined;
  #sub: Promise<NodeRedisLike> | undefined;
  #channels = new Map<string, Channel>();

  constructor(readonly client: NodeRedisLike) {}

  /** EVALSHA a preloaded script; after NOSCRIPT (flush, restart, failover) reload once and retry once. */
  run(script: Script, keys: string[], args: string[]): Promise<unknown> {
    const cmd = ["EVALSHA", script.sha, String(keys.length), ...keys, ...args];
    if (!this.#ready) return this.#load().then(() => this.#send(cmd));
    return this.#send(cmd);
  }

  #send(cmd: string[]): Promise<unknown> {
    return this.client.sendCommand(cmd).catch((e: unknown) => {
      if (!isNoScript(e)) throw e;
      this.#ready = false;
      return this.#load().then(() => this.client.sendCommand(cmd));
    });
  }

  /** SCRIPT LOAD every script once (pipelined: one round trip). */
  #load(): Promise<void> {
    return this.#loading ??= Promise.all(ALL_SCRIPTS.map(async (s) => {
      const sha = await this.client.sendCommand(["SCRIPT", "LOAD", s.source]);
      if (sha !== s.sha) throw new Error(`SCRIPT LOAD of ${s.name} returned ${String(sha)}, expected ${s.sha}`);
    })).then(() => {
      this.#ready = true;
    }).finally(() => {
      this.#loading = undefined;
    });
  }

  #subscriber(): Promise<NodeRedisLike> {
    return this.#sub ??= (async () => {
      const sub = this.client.duplicate();
      // Socket errors while reconnecting are reported here; waiters fall back to their bounded sleeps.
      sub.on("error", () => {});
      const close = () => {
        this.#sub = undefined;
        this.client.off?.("end", close);
        sub.disconnect().catch(() => {});
      };
      try {
        await sub.connect();
      } catch (e) {
        this.#sub = undefined;
        throw e;
      }
      // The subscriber lives and dies with the caller's client, so closing that client lets the process exit.
      this.client.on("end", close);
      return sub;
    })();
  }

  /**
   * Route grant messages for waiter `wid` on `channel` to `onGrant`. The first waiter on a channel subscribes
   * (awaited, so a waiter is listening before it queues); the last one to leave unsubscribes. Returns the
   * function that removes this waiter.
   */
  async listen(channel: string, wid: string, onGrant: (fence: number) => void): Promise<() => void> {
    let ch = this.#channels.get(channel);
    if (!ch) {
      const waiters = new Map<string, (fence: number) => void>();
      const listener = (message: string) => {
        const i = message.indexOf(":");
        waiters.get(message.slice(0, i))?.(Number(message.slice(i + 1)));
      };
      const ready = this.#subscriber().then((sub) => sub.subscribe(channel, listener)).then(() => {});
      ch = { waiters, listener, ready };
      this.#channels.set(channel, ch);
    }
    const c = ch;
    c.waiters.set(wid, onGrant);
    const leave = () => {
      if (!c.waiters.delete(wid) || c.waiters.size > 0 || this.#channels.get(channel) !== c) return;
      this.#channels.delete(channel);
      c.ready.then(() => this.#sub).then((sub) => sub?.unsubscribe(channel, c.listener)).catch(() => {});
    };
    try {
      await c.ready;
    } catch (e) {
      if (this.#channels.get(channel) === c) this.#channels.delete(channel);
      c.waiters.delete(wid);
      throw e;
    }
    return leave;
  }

  /** Channels with at least one local waiter (for tests and diagnostics). */
  get listening(): number {
    return this.#channels.size;
  }
}
