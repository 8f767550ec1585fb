// Client-side wire accounting for the benchmark: round trips, TCP connects and the commands a process writes to
// Redis, by patching net.Socket. Only sockets whose remote port is the Redis port are counted.
//
// A round trip is counted for a write on a socket that has received data since its previous counted write (or
// has never written): commands pipelined back to back count once, a command sent after waiting for a reply
// counts again. Commands are counted by parsing the RESP arrays written (the first word, lower-cased).
import { Socket } from "node:net";

export interface WireCounts {
  roundTrips: number;
  connects: number;
  commands: Record<string, number>;
}

const origWrite = Socket.prototype.write;
const origEmit = Socket.prototype.emit;
const GOT = Symbol("gotData");
const BUF = Symbol("pending");

let port = 0;
let counts: WireCounts = { roundTrips: 0, connects: 0, commands: {} };

type Tracked = Socket & { [GOT]?: boolean; [BUF]?: Buffer };

/** Parse complete RESP arrays (of bulk strings) from the socket's outgoing bytes; keep the remainder. */
function consume(s: Tracked, chunk: Buffer): void {
  let buf = s[BUF] ? Buffer.concat([s[BUF]!, chunk]) : chunk;
  let pos = 0;
  for (;;) {
    if (pos >= buf.length) break;
    if (buf[pos] !== 0x2a /* * */) { // not RESP (inline command): give up on this buffer
      pos = buf.length;
      break;
    }
    const nl = buf.indexOf("\r\n", pos);
    if (nl < 0) break;
    const n = Number(buf.toString("latin1", pos + 1, nl));
    let p = nl + 2, first = "", complete = true;
    for (let i = 0; i < n; i++) {
      const nl2 = buf.indexOf("\r\n", p);
      if (nl2 < 0) {
        complete = false;
        break;
      }
      const len = Number(buf.toString("latin1", p + 1, nl2));
      if (nl2 + 2 + len + 2 > buf.length) {
        complete = false;
        break;
      }
      if (i === 0) first = buf.toString("latin1", nl2 + 2, nl2 + 2 + len).toLowerCase();
      if (i === 1 && (first === "script" || first === "client" || first === "config")) {
        first += "|" + buf.toString("latin1", nl2 + 2, nl2 + 2 + len).toLowerCase();
      }
      p = nl2 + 2 + len + 2;
    }
    if (!complete) break;
    counts.commands[first] = (counts.commands[first] ?? 0) + 1;
    pos = p;
  }
  buf = buf.subarray(pos);
  s[BUF] = buf.length ? Buffer.from(buf) : undefined;
}

function counted(s: Socket): boolean {
  return port !== 0 && s.remotePort === port;
}

/** Start counting traffic to `redisPort` (patches net.Socket.prototype). */
export function startWire(redisPort: number): void {
  port = redisPort;
  counts = { roundTrips: 0, connects: 0, commands: {} };
  Socket.prototype.write = function (this: Tracked, chunk: unknown, ...rest: unknown[]) {
    if (counted(this)) {
      if (this[GOT] !== false) counts.roundTrips++;
      this[GOT] = false;
      const b = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : Buffer.from(chunk as Uint8Array);
      consume(this, b);
    }
    // deno-lint-ignore no-explicit-any
    return (origWrite as any).call(this, chunk, ...rest);
  } as typeof origWrite;
  Socket.prototype.emit = function (this: Tracked, event: string | symbol, ...args: unknown[]) {
    if (event === "data" && counted(this)) this[GOT] = true;
    else if (event === "connect" && counted(this)) counts.connects++;
    return origEmit.call(this, event, ...args);
  } as typeof origEmit;
}

/** Reset the counters (keeps counting). */
export function resetWire(): void {
  counts = { roundTrips: 0, connects: 0, commands: {} };
}

/** Stop counting and return what was counted. */
export function stopWire(): WireCounts {
  Socket.prototype.write = origWrite;
  Socket.prototype.emit = origEmit;
  port = 0;
  return counts;
}

export function readWire(): WireCounts {
  return { roundTrips: counts.roundTrips, connects: counts.connects, commands: { ...counts.commands } };
}

// ---------------------------------------------------------------------------------------------------------------
// Timestamps for the B3 gap breakdown: when the last reply/message was read from a Redis socket, and when the first
// command was written after arm().

const wallNow = () => performance.timeOrigin + performance.now();

export interface Stamps {
  /** Wall time of the last `data` event on a Redis socket. */
  lastData: number;
  /** Wall time of the first write to a Redis socket after arm() (NaN until then). */
  writeAt: number;
  arm(): void;
  stop(): void;
}

export function startStamps(redisPort: number): Stamps {
  let armed = false;
  const st: Stamps = {
    lastData: NaN,
    writeAt: NaN,
    arm() {
      armed = true;
      st.writeAt = NaN;
    },
    stop() {
      Socket.prototype.write = origWrite;
      Socket.prototype.emit = origEmit;
    },
  };
  Socket.prototype.write = function (this: Socket, ...args: unknown[]) {
    if (armed && this.remotePort === redisPort) {
      armed = false;
      st.writeAt = wallNow();
    }
    // deno-lint-ignore no-explicit-any
    return (origWrite as any).apply(this, args);
  } as typeof origWrite;
  Socket.prototype.emit = function (this: Socket, event: string | symbol, ...args: unknown[]) {
    if (event === "data" && this.remotePort === redisPort) st.lastData = wallNow();
    return origEmit.call(this, event, ...args);
  } as typeof origEmit;
  return st;
}
