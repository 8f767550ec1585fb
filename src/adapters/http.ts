/**
 * Adapter for Redis over HTTP with the [Upstash REST API](https://upstash.com/docs/redis/features/restapi), for
 * runtimes without TCP sockets (edge functions, workers). It needs only `fetch`.
 *
 * HTTP has no pub/sub, so a waiter polls: it retries with jittered exponential backoff (10 ms doubling to 1 s),
 * every sleep bounded by the holder's remaining TTL. A released lease therefore reaches a waiter within about a
 * second rather than a few milliseconds, and waiters are not served first come, first served. The `replicas`
 * option is not available (`WAIT` is meaningless when requests may use different server connections).
 *
 * @example
 * ```ts
 * import { withLock } from "redlease";
 * import { upstash } from "redlease/http";
 *
 * // A Cloudflare Worker: config comes from the runtime's env, and the driver is kept for later requests.
 * let redis: ReturnType<typeof upstash> | undefined;
 * export default {
 *   async fetch(_request: Request, env: { UPSTASH_REDIS_REST_URL: string; UPSTASH_REDIS_REST_TOKEN: string }) {
 *     redis ??= upstash({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN });
 *     await withLock(redis, "invoice:42", async (signal, lease) => {
 *       await chargeCustomer({ fence: lease.fence, signal });
 *     }, { waitMs: 0, leaseMs: 10_000 });
 *     return new Response("charged");
 *   },
 * };
 * ```
 *
 * @module
 */
import type { Driver } from "../driver.ts";
import { checkKeys, fail } from "../_validate.ts";

/** Where and how to reach the REST endpoint. */
export interface UpstashOptions {
  /** The database's REST URL, e.g. `https://us1-merry-cat-32748.upstash.io`. Commands are POSTed to it. */
  readonly url: string | URL;
  /** The REST token, sent as `Authorization: Bearer <token>`. */
  readonly token: string;
  /**
   * The `fetch` to send requests with (e.g. one with a timeout, retries or a custom agent).
   *
   * @default globalThis.fetch
   */
  readonly fetch?: (input: string, init: RequestInit) => Promise<Response>;
}

// The protocol, per https://upstash.com/docs/redis/features/restapi ("POST Command in Body", "HTTP Codes",
// "Response"): the whole command is POSTed to the REST URL as a JSON array of strings; the reply is
// `{ "result": … }` (strings, integers as JSON numbers, null, arrays) or `{ "error": "<Redis's message>" }` with
// status 400 when execution fails (so a missing script reads `NOSCRIPT …`); 401 when the token is missing or
// wrong. Strings are plain, as no `Upstash-Encoding: base64` header is sent.

/**
 * Create a {@linkcode Driver} that sends every command as one HTTP request to an Upstash-compatible REST endpoint.
 *
 * Errors reported by Redis reject with an `Error` whose message is Redis's own (`NOSCRIPT …`, `WRONGTYPE …`);
 * any other failed request (bad token, proxy error, non-JSON reply) rejects with an `Error` naming the HTTP status.
 *
 * @param options The REST `url` and `token`, and optionally the `fetch` to use.
 * @returns A driver without pub/sub: waiters poll.
 * @throws {TypeError} when `url` is not an http(s) URL, `token` not a non-empty string, or `fetch` not a function.
 *
 * @example
 * ```ts
 * import { acquire, release } from "redlease";
 * import { upstash } from "redlease/http";
 *
 * const redis = upstash({ url: "https://us1-merry-cat-32748.upstash.io", token: Deno.env.get("UPSTASH_TOKEN")! });
 * const lease = await acquire(redis, "cron:cleanup", { waitMs: 0, leaseMs: 10_000 });
 * await release(lease);
 * ```
 */
export function upstash(options: UpstashOptions): Driver {
  const op = "create Upstash driver";
  if (typeof options !== "object" || options === null) fail(op, "options", "must be an object", options);
  checkKeys(op, options, ["url", "token", "fetch"]);
  const { token, fetch: customFetch } = options;
  let url: string;
  try {
    url = new URL(options.url).href;
    if (!/^https?:$/.test(new URL(url).protocol)) throw new TypeError();
  } catch {
    fail(op, "url", "must be an http(s) URL", options.url);
  }
  if (typeof token !== "string" || token.length === 0) fail(op, "token", "must be a non-empty string", token);
  if (customFetch !== undefined && typeof customFetch !== "function") {
    fail(op, "fetch", "must be a function", customFetch);
  }
  const headers = { "authorization": `Bearer ${token}`, "content-type": "application/json" };

  async function send(command: string[], signal: AbortSignal | undefined): Promise<unknown> {
    // redlease aborts the signal when it stops waiting (the caller's deadline or signal): the fetch stops too.
    const init: RequestInit = { method: "POST", headers, body: JSON.stringify(command), signal };
    const res = await (customFetch ? customFetch(url, init) : globalThis.fetch(url, init));
    const text = await res.text();
    let body: { result?: unknown; error?: unknown } | undefined;
    try {
      body = JSON.parse(text);
    } catch { /* not JSON: reported below with the status */ }
    const error = typeof body?.error === "string" ? body.error : undefined;
    // Redis's own error (400, or in a 200 body): keep its message, whose first word redlease reads (NOSCRIPT).
    if (error !== undefined && (res.ok || res.status === 400)) throw new Error(error);
    if (!res.ok || typeof body !== "object" || body === null || !("result" in body)) {
      const detail = error ?? text.slice(0, 200);
      throw new Error(`${command[0]} over HTTP failed with status ${res.status}${detail ? `: ${detail}` : ""}`);
    }
    return body.result;
  }

  return {
    abortable: true,
    evalScript: (sha, keys, args, signal) => send(["EVALSHA", sha, String(keys.length), ...keys, ...args], signal),
    // After NOSCRIPT: the script in full, run (and cached by Redis) in the same request.
    evalSource: (source, keys, args, signal) => send(["EVAL", source, String(keys.length), ...keys, ...args], signal),
    loadScript: async (source, _key, signal) => String(await send(["SCRIPT", "LOAD", source], signal)),
  };
}

export type { Driver } from "../driver.ts";
