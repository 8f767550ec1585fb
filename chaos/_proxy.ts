// A fault-injecting TCP proxy between Redis clients and a redis-server, for the chaos scenarios and behavioural
// tests: latency, half-open blackholes, resets, lost replies and requests, partitions triggered by content, refused
// connections. Only node: built-ins, so it runs in Node, Bun and Deno 2. One proxy is one "route": give each worker
// or client its own. "up" is client → Redis, "down" is Redis → client.
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";

/** A connection is a `subscriber` once its client sent SUBSCRIBE, SSUBSCRIBE or PSUBSCRIBE. */
export type Kind = "command" | "subscriber";
/** Which connections a fault applies to. */
export type KindSel = Kind | "all";
/** `up`: client → Redis; `down`: Redis → client. */
export type Direction = "up" | "down";
/** The direction(s) a fault applies to. */
export type Directions = Direction | "both";

/** An open connection, as `connections()` reports it; `blackholed`: by a rule or a `partitionOn` trigger. */
export type ConnInfo = { id: number; kind: Kind; blackholed: Direction[] };

/** Options of `partitionOn`: kind defaults to "subscriber", direction (what is cut off) to "both". */
export type PartitionOn = { pattern: string | RegExp; kind?: KindSel; direction?: Directions; hold?: boolean };

/** Counters since the proxy started; bytes and commands count what was delivered. */
export type ProxyStats = {
  accepted: number;
  bytes: Record<Kind, Record<Direction, number>>;
  commands: Record<Kind, number>;
};

// after: a one-shot riding on this request (its reply is lost; with "reset" the connection is reset once sent)
type Data = { data: Buffer; commands: number; after?: "loseReply" | "reset" };
type Chunk = Data | "end"; // "end": the sender's FIN, forwarded in order with the bytes
type Silence = { hold: boolean }; // hold: keep swallowed bytes for heal(); else drop them

interface Pipe {
  queue: { chunk: Chunk; due: number }[]; // delayed chunks, in order
  lastDue: number;
  timer?: ReturnType<typeof setTimeout>;
  held: Chunk[]; // swallowed by a blackhole with `hold`, delivered by heal()
  cut?: Silence; // set by a partitionOn trigger
}

const newPipe = (): Pipe => ({ queue: [], lastDue: 0, held: [] });

/** One client connection and its upstream connection to Redis. */
class Conn {
  kind: Kind = "command";
  readonly up = newPipe();
  readonly down = newPipe();
  unparsed: Buffer = Buffer.alloc(0); // client bytes not yet forming a whole RESP command
  lost = false; // a blackhole dropped bytes: the RESP stream cannot resume
  loseReply = false; // swallow what Redis sends next, and reset
  dead = false;
  constructor(readonly id: number, readonly client: Socket, readonly server: Socket) {}
}

type OneShotKind = "loseRequest" | "resetNext" | "loseReply";
type OneShot = { what: OneShotKind; kind: KindSel; skip: number; fire(id: number): void };
type Hole = { kind: KindSel; dirs: Direction[]; hold: boolean };
type Trigger = Hole & { match(text: string): boolean; fire(id: number): void };

const SUBSCRIBES = new Set(["SUBSCRIBE", "SSUBSCRIBE", "PSUBSCRIBE"]);
const dirsOf = (d: Directions): Direction[] => (d === "both" ? ["up", "down"] : [d]);
const matches = (sel: KindSel, kind: Kind) => sel === "all" || sel === kind;
const noDelay = () => ({ up: { ms: 0, jitterMs: 0 }, down: { ms: 0, jitterMs: 0 } });

/** Close a socket with a TCP RST where the runtime can (Node, Bun and Deno 2 all have resetAndDestroy). */
function rst(s: Socket): void {
  if (s.connecting || typeof s.resetAndDestroy !== "function") s.destroy();
  else if (!s.destroyed) s.resetAndDestroy();
}

/**
 * The next whole RESP command (an array of bulk strings) in `buf` from `pos`: its name and where it ends;
 * undefined if incomplete. An inline command (not an array) is skipped as one line with an empty name.
 */
function nextCommand(buf: Buffer, pos: number): { name: string; end: number } | undefined {
  let eol = buf.indexOf("\r\n", pos);
  if (eol < 0) return undefined;
  const argc = Number(buf.toString("latin1", pos + 1, eol));
  let p = eol + 2;
  let name = "";
  for (let i = 0; i < argc; i++) {
    eol = buf.indexOf("\r\n", p);
    if (eol < 0) return undefined;
    const start = eol + 2;
    const end = start + Number(buf.toString("latin1", p + 1, eol)) + 2;
    if (!(end > p)) return { name: "", end: buf.length }; // not RESP: give up on these bytes
    if (end > buf.length) return undefined;
    if (i === 0) name = buf.toString("latin1", start, end - 2);
    p = end;
  }
  return { name, end: p };
}

/** A running proxy; see `startProxy`. Every fault is settable and clearable while connections are open. */
export class FaultProxy {
  readonly #server: Server;
  readonly #target: { host: string; port: number };
  readonly #conns = new Map<number, Conn>();
  readonly #delays = { command: noDelay(), subscriber: noDelay() };
  #holes: Hole[] = [];
  #triggers: Trigger[] = [];
  #oneShots: OneShot[] = [];
  #paused = false;
  #nextId = 1;
  #stats: ProxyStats = {
    accepted: 0,
    bytes: { command: { up: 0, down: 0 }, subscriber: { up: 0, down: 0 } },
    commands: { command: 0, subscriber: 0 },
  };

  /** @internal use startProxy(); `port` is the one the proxy listens on, on 127.0.0.1. */
  constructor(readonly port: number, server: Server, target: { host: string; port: number }) {
    this.#server = server;
    this.#target = target;
    server.on("connection", (s) => this.#accept(s));
  }

  /** `redis://127.0.0.1:<port>`, for a client's `url`. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** The open connections. */
  connections(): ConnInfo[] {
    const blackholed = (c: Conn) => (["up", "down"] as const).filter((d) => this.#silence(c, d));
    return [...this.#conns.values()].map((c) => ({ id: c.id, kind: c.kind, blackholed: blackholed(c) }));
  }

  /** A copy of the counters. */
  stats(): ProxyStats {
    return structuredClone(this.#stats);
  }

  /** Add `ms` (+ up to `jitterMs`) to each chunk in the direction(s), keeping byte order. `ms: 0` clears it. */
  delay(opts: { ms: number; jitterMs?: number; kind?: KindSel; direction?: Directions }): void {
    const delay = { ms: opts.ms, jitterMs: opts.jitterMs ?? 0 };
    for (const kind of ["command", "subscriber"] as const) {
      if (!matches(opts.kind ?? "all", kind)) continue;
      for (const d of dirsOf(opts.direction ?? "both")) this.#delays[kind][d] = delay;
    }
  }

  /**
   * Half-open blackhole: bytes (and FINs) in the direction(s) are swallowed, sockets stay open, nothing tells
   * the peer. With `hold` they are kept and delivered late by heal(); without, they are dropped and heal()
   * resets the connections that lost bytes (RESP cannot resume mid-stream).
   */
  blackhole(opts: { kind?: KindSel; direction?: Directions; hold?: boolean } = {}): void {
    this.#holes.push({ kind: opts.kind ?? "all", dirs: dirsOf(opts.direction ?? "both"), hold: opts.hold ?? false });
  }

  /**
   * Blackhole one connection the moment bytes matching `pattern` (within one chunk) flow down to it: those bytes
   * are not delivered (with `hold`, heal() delivers them late). One-shot: resolves with the connection id when it
   * fires; heal() disarms it if it has not fired.
   */
  partitionOn(opts: PartitionOn): Promise<number> {
    const { pattern, kind = "subscriber", direction = "both", hold = false } = opts;
    const regex = typeof pattern === "string" ? undefined : new RegExp(pattern.source, pattern.flags.replace("g", ""));
    const match = (text: string) => (regex ? regex.test(text) : text.includes(pattern as string));
    return new Promise((fire) => this.#triggers.push({ kind, dirs: dirsOf(direction), hold, match, fire }));
  }

  /** End every blackhole and triggered partition: held bytes are delivered, connections that lost bytes reset. */
  heal(): void {
    this.#holes = [];
    this.#triggers = [];
    for (const c of this.#conns.values()) {
      c.up.cut = c.down.cut = undefined;
      if (c.lost) this.#kill(c);
      else for (const d of ["up", "down"] as const) for (const chunk of c[d].held.splice(0)) this.#arrive(c, d, chunk);
    }
  }

  /** Reset (RST both sides of) the open connections of `kind`; returns how many. */
  reset(opts: { kind?: KindSel } = {}): number {
    const victims = [...this.#conns.values()].filter((c) => matches(opts.kind ?? "all", c.kind));
    for (const c of victims) this.#kill(c);
    return victims.length;
  }

  // The one-shots below act on the next request (a chunk of client bytes) on a connection of `kind` (default
  // "command"), or with `skip: n` on the one after the next n, and resolve with that connection's id when they fire.

  /** The request is forwarded, then the connection reset before its reply is back: it may or may not have run. */
  resetNext(opts: { kind?: KindSel; skip?: number } = {}): Promise<number> {
    return this.#arm("resetNext", opts);
  }

  /** The request runs on Redis, its reply is swallowed and the connection reset (RESP cannot skip a reply). */
  loseNextReply(opts: { kind?: KindSel; skip?: number } = {}): Promise<number> {
    return this.#arm("loseReply", opts);
  }

  /** The request is swallowed and the connection reset: the command never reaches Redis. */
  loseNextRequest(opts: { kind?: KindSel; skip?: number } = {}): Promise<number> {
    return this.#arm("loseRequest", opts);
  }

  /**
   * Refuse new connections (each is reset as soon as it is accepted) until resume(). Connections that connect
   * but stay silent: blackhole(), whose rules apply to new connections too.
   */
  pause(): void {
    this.#paused = true;
  }

  /** Accept new connections again. */
  resume(): void {
    this.#paused = false;
  }

  /** Remove every fault: heal(), no delay, no pending one-shot, resume(). */
  clear(): void {
    this.heal();
    this.delay({ ms: 0 });
    this.#oneShots = [];
    this.resume();
  }

  /** Stop listening and destroy every socket; nothing of the proxy keeps the process alive afterwards. */
  close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const c of this.#conns.values()) this.#kill(c, (s) => s.destroy());
    return closed;
  }

  #arm(what: OneShotKind, opts: { kind?: KindSel; skip?: number }): Promise<number> {
    const { kind = "command", skip = 0 } = opts;
    return new Promise((fire) => this.#oneShots.push({ what, kind, skip, fire }));
  }

  #take(what: OneShotKind, c: Conn): boolean {
    const i = this.#oneShots.findIndex((o) => o.what === what && matches(o.kind, c.kind));
    if (i < 0) return false;
    if (this.#oneShots[i].skip > 0) {
      this.#oneShots[i].skip--; // this request passes
      return false;
    }
    this.#oneShots.splice(i, 1)[0].fire(c.id);
    return true;
  }

  #accept(client: Socket): void {
    this.#stats.accepted++;
    client.on("error", () => {});
    if (this.#paused) return rst(client);
    const server = connect({ host: this.#target.host, port: this.#target.port, allowHalfOpen: true });
    const c = new Conn(this.#nextId++, client, server);
    this.#conns.set(c.id, c);
    server.on("error", () => {});
    client.on("data", (data: Buffer) => this.#arrive(c, "up", { data, commands: this.#sniff(c, data) }));
    server.on("data", (data: Buffer) => this.#arrive(c, "down", { data, commands: 0 }));
    client.on("end", () => this.#arrive(c, "up", "end"));
    server.on("end", () => this.#arrive(c, "down", "end"));
    client.on("close", (hadError: boolean) => this.#closed(c, "up", hadError));
    server.on("close", (hadError: boolean) => this.#closed(c, "down", hadError));
  }

  /** Count the whole commands in the client's bytes; a SUBSCRIBE makes the connection a subscriber. */
  #sniff(c: Conn, data: Buffer): number {
    const buf = c.unparsed.length ? Buffer.concat([c.unparsed, data]) : data;
    let pos = 0;
    let count = 0;
    for (let cmd = nextCommand(buf, pos); cmd; cmd = nextCommand(buf, pos)) {
      pos = cmd.end;
      if (!cmd.name) continue;
      count++;
      if (SUBSCRIBES.has(cmd.name.toUpperCase())) c.kind = "subscriber";
    }
    c.unparsed = buf.subarray(pos);
    return count;
  }

  /** Bytes or a FIN from one side: apply the faults, then send them on. */
  #arrive(c: Conn, dir: Direction, chunk: Chunk): void {
    if (c.dead) return;
    if (dir === "down" && chunk !== "end") this.#trigger(c, chunk);
    const silence = this.#silence(c, dir);
    if (silence) {
      if (silence.hold) c[dir].held.push(chunk);
      else c.lost = true; // the RESP stream cannot resume: heal() resets the connection
      return;
    }
    if (chunk === "end") return this.#send(c, dir, chunk);
    if (dir === "down" && c.loseReply) return this.#kill(c);
    if (dir === "up") {
      if (this.#take("loseRequest", c)) return this.#kill(c);
      if (this.#take("resetNext", c)) chunk.after = "reset";
      else if (this.#take("loseReply", c)) chunk.after = "loseReply";
    }
    this.#send(c, dir, chunk);
  }

  #trigger(c: Conn, chunk: Data): void {
    if (this.#silence(c, "down")) return;
    const text = chunk.data.toString("latin1");
    const i = this.#triggers.findIndex((t) => matches(t.kind, c.kind) && t.match(text));
    if (i < 0) return;
    const t = this.#triggers.splice(i, 1)[0];
    for (const d of t.dirs) c[d].cut = { hold: t.hold };
    t.fire(c.id);
  }

  /** Whether (and how) the direction is blackholed; anything already held keeps it held, to keep order. */
  #silence(c: Conn, dir: Direction): Silence | undefined {
    const pipe = c[dir];
    return pipe.cut ?? this.#holes.find((h) => matches(h.kind, c.kind) && h.dirs.includes(dir)) ??
      (pipe.held.length ? { hold: true } : undefined);
  }

  /** Into the direction's delay queue (or straight out when there is no delay and nothing queued). */
  #send(c: Conn, dir: Direction, chunk: Chunk): void {
    const pipe = c[dir];
    const { ms, jitterMs } = this.#delays[c.kind][dir];
    const now = performance.now();
    pipe.lastDue = Math.max(pipe.lastDue, now + ms + Math.random() * jitterMs); // never before an earlier chunk
    if (pipe.lastDue <= now && !pipe.queue.length) return this.#deliver(c, dir, chunk);
    pipe.queue.push({ chunk, due: pipe.lastDue });
    if (!pipe.timer) this.#schedule(c, dir);
  }

  #schedule(c: Conn, dir: Direction): void {
    const pipe = c[dir];
    const wait = Math.max(1, Math.ceil(pipe.queue[0].due - performance.now()));
    pipe.timer = setTimeout(() => {
      pipe.timer = undefined;
      while (pipe.queue.length && pipe.queue[0].due <= performance.now() && !c.dead) {
        this.#deliver(c, dir, pipe.queue.shift()!.chunk);
      }
      if (pipe.queue.length && !c.dead) this.#schedule(c, dir);
    }, wait);
  }

  #deliver(c: Conn, dir: Direction, chunk: Chunk): void {
    const [src, dst] = dir === "up" ? [c.client, c.server] : [c.server, c.client];
    if (chunk === "end") {
      dst.end();
      return;
    }
    if (chunk.after) c.loseReply = true; // set before the request leaves, so no reply can slip through
    this.#stats.bytes[c.kind][dir] += chunk.data.length;
    this.#stats.commands[c.kind] += chunk.commands;
    const onSent = chunk.after === "reset" ? () => this.#kill(c) : undefined;
    if (!dst.write(chunk.data, onSent) && !src.isPaused()) { // backpressure
      src.pause();
      dst.once("drain", () => src.resume());
    }
  }

  /** One side closed: an abrupt close (RST) is passed on unless that direction is blackholed. */
  #closed(c: Conn, dir: Direction, hadError: boolean): void {
    if (hadError && !c.dead && !this.#silence(c, dir)) this.#kill(c);
    if (c.client.destroyed && c.server.destroyed) this.#kill(c, () => {});
  }

  /** Drop the connection, closing both sockets with `end` (rst: abruptly). */
  #kill(c: Conn, end: (s: Socket) => void = rst): void {
    c.dead = true;
    for (const pipe of [c.up, c.down]) {
      clearTimeout(pipe.timer);
      pipe.queue = [];
      pipe.held = [];
    }
    end(c.client);
    end(c.server);
    this.#conns.delete(c.id);
  }
}

/** Start a proxy on 127.0.0.1 (a free port) in front of `target` (host defaults to 127.0.0.1). */
export async function startProxy(target: { host?: string; port: number }): Promise<FaultProxy> {
  const server = createServer({ allowHalfOpen: true });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address() as AddressInfo;
  return new FaultProxy(port, server, { host: target.host ?? "127.0.0.1", port: target.port });
}
