// Harness: a minimal one-shot RESP2 client for administrative commands (readiness probes, CLUSTER, SENTINEL,
// INFO). Each command opens its own loopback connection and closes it after the reply, independent of any client
// library, so the harness keeps working while a client under test is misbehaving (or a server is paused).
import { Buffer } from "node:buffer";
import { connect } from "node:net";

export class RespError extends Error {
  override name = "RespError";
}

export type Reply = string | number | null | Buffer | RespError | Reply[];
export type Arg = string | number | Buffer;

function encode(args: Arg[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n"));
  }
  return Buffer.concat(parts);
}

function parseReply(buf: Buffer, pos: number): { value: Reply; pos: number } | null {
  if (pos >= buf.length) return null;
  const eol = buf.indexOf("\r\n", pos);
  if (eol < 0) return null;
  const type = String.fromCharCode(buf[pos]!);
  const line = buf.toString("utf8", pos + 1, eol);
  let next = eol + 2;
  switch (type) {
    case "+":
      return { value: line, pos: next };
    case "-":
      return { value: new RespError(line), pos: next };
    case ":":
      return { value: Number(line), pos: next };
    case "$": {
      const n = Number(line);
      if (n < 0) return { value: null, pos: next };
      if (buf.length < next + n + 2) return null;
      return { value: buf.subarray(next, next + n), pos: next + n + 2 };
    }
    case "*": {
      const n = Number(line);
      if (n < 0) return { value: null, pos: next };
      const arr: Reply[] = [];
      for (let i = 0; i < n; i++) {
        const r = parseReply(buf, next);
        if (!r) return null;
        arr.push(r.value);
        next = r.pos;
      }
      return { value: arr, pos: next };
    }
    default:
      throw new Error(`unexpected RESP type byte ${JSON.stringify(type)}`);
  }
}

function decode(r: Reply): Reply {
  if (Buffer.isBuffer(r)) return r.toString("utf8");
  if (Array.isArray(r)) return r.map(decode);
  return r;
}

/**
 * Send one command to 127.0.0.1:port on a fresh connection and return the reply (bulk strings decoded as UTF-8
 * unless `raw`). Rejects with RespError on an error reply, with a plain Error on connection failure or timeout.
 */
export function command(port: number, args: Arg[], opts: { timeoutMs?: number; raw?: boolean } = {}): Promise<Reply> {
  const timeoutMs = opts.timeoutMs ?? 5000;
  return new Promise<Reply>((resolve, reject) => {
    const sock = connect({ host: "127.0.0.1", port });
    let buf: Buffer = Buffer.alloc(0);
    let done = false;
    const finish = (err: Error | null, value?: Reply) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value as Reply);
    };
    const timer = setTimeout(
      () => finish(new Error(`127.0.0.1:${port} ${String(args[0])}: no reply within ${timeoutMs} ms`)),
      timeoutMs,
    );
    sock.on("connect", () => sock.write(encode(args)));
    sock.on("data", (d: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      let r: ReturnType<typeof parseReply>;
      try {
        r = parseReply(buf, 0);
      } catch (e) {
        return finish(e as Error);
      }
      if (!r) return;
      if (r.value instanceof RespError) {
        r.value.message = `127.0.0.1:${port} ${args.slice(0, 3).map(String).join(" ")}: ${r.value.message}`;
        return finish(r.value);
      }
      finish(null, opts.raw ? r.value : decode(r.value));
    });
    sock.on("error", (e) => finish(new Error(`127.0.0.1:${port} ${String(args[0])}: ${e.message}`)));
    sock.on("close", () => finish(new Error(`127.0.0.1:${port} ${String(args[0])}: connection closed`)));
  });
}

/** INFO text → { field: value }. */
export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0 && !line.startsWith("#")) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** One INFO section of the server on `port`, parsed. */
export async function info(port: number, section: string, timeoutMs = 3000): Promise<Record<string, string>> {
  return parseInfo(String(await command(port, ["INFO", section], { timeoutMs })));
}

/** [k1, v1, k2, v2, ...] → { k1: v1, ... } */
export function pairs(r: Reply): Record<string, string> {
  const out: Record<string, string> = {};
  const a = r as Reply[];
  for (let i = 0; i + 1 < a.length; i += 2) out[String(a[i])] = String(a[i + 1]);
  return out;
}
