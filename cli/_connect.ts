// The Redis connection of the CLI: URL from --url or REDIS_URL, node-redis loaded on demand (bundled into the
// published dist/cli.js: see tsup.config.ts), fail-fast connect.
import process from "node:process";
import type { createClient } from "redis";
import { CliError, describeError, EXIT, usage } from "./_common.ts";

export type RedisClient = ReturnType<typeof createClient>;

export const DEFAULT_URL = "redis://localhost:6379";

/** How long the first connection (TCP, TLS and the client's handshake) may take before exit code 5. */
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * The Redis URL to use: --url, else $REDIS_URL, else localhost; `redis://` or `rediss://` (TLS), with ACL credentials
 * as `user:password@` if any (else REDIS_USERNAME / REDIS_PASSWORD: see envCredentials). Checked here so a typo is a
 * usage error; a password in it is never printed (see redact).
 */
export function resolveUrl(command: string, flagValue: string | undefined): string {
  const fromEnv = process.env.REDIS_URL;
  const url = flagValue ?? (fromEnv !== undefined && fromEnv !== "" ? fromEnv : DEFAULT_URL);
  const source = flagValue !== undefined ? "--url" : fromEnv ? "REDIS_URL" : "default URL";
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw usage(command, `bad ${source} '${redact(url)}': expected redis://[user:password@]host[:port][/db]`);
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw usage(command, `bad ${source} '${redact(url)}': the scheme must be redis:// or rediss://`);
  }
  if (parsed.hostname === "") throw usage(command, `bad ${source} '${redact(url)}': no host`);
  if (parsed.pathname !== "" && parsed.pathname !== "/" && !/^\/\d+$/.test(parsed.pathname)) {
    throw usage(command, `bad ${source} '${redact(url)}': the path must be a database number`);
  }
  return url;
}

/**
 * Which Redis and database a URL names, without its credentials: what a nested `run` compares (REDLEASE_SERVER)
 * before it takes a token for the same lease. localhost and 127.0.0.1 are not made equal: a mismatch only means the
 * nested run acquires on its own, which waits for the enclosing hold if it is the same Redis after all.
 */
export function serverOf(url: string): string {
  const u = new URL(url);
  const db = u.pathname.length > 1 ? u.pathname.slice(1) : "0";
  return `${u.protocol}//${u.hostname}:${u.port || "6379"}/${db}`;
}

/** The URL with its password hidden, for messages: also in a URL that does not parse (a typo must not print it). */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    if (!u.password) return url;
    u.password = "***";
    return u.toString();
  } catch {
    // Up to the last '@': a password may hold an unescaped '@' (or '/', which is why the URL did not parse).
    return url.replace(/^([^:/?#]*:\/\/[^:@/?#]*:).*@/, "$1***@");
  }
}

/**
 * ACL credentials from the environment, for a URL that carries none: REDIS_USERNAME and REDIS_PASSWORD (the URL's
 * own `user:password@` win). Passed to the client as options, so they are never part of a URL that is printed.
 */
export function envCredentials(): { username?: string; password?: string } {
  const username = process.env.REDIS_USERNAME || undefined, password = process.env.REDIS_PASSWORD || undefined;
  return { ...(username ? { username } : {}), ...(password ? { password } : {}) };
}

/**
 * Load node-redis and connect. The first connect fails at once (no retry loop) so an unreachable Redis is one
 * line and exit code 5; once connected, the client reconnects with backoff so a blip does not lose a lease
 * that the watchdog can still renew. The offline queue is off: commands fail instead of hanging while
 * disconnected, and the watchdog retries them until the lease's deadline.
 */
export async function connect(url: string): Promise<RedisClient> {
  let redis: typeof import("redis");
  try {
    redis = await import("redis");
  } catch {
    // Only from source: the published CLI (dist/cli.js) carries its own copy of node-redis.
    throw new CliError("redlease CLI from source needs node-redis: npm install redis", EXIT.REDIS);
  }
  let connected = false;
  let client: RedisClient;
  try {
    client = redis.createClient({
      // (node-redis lets the URL's credentials win over these.)
      ...envCredentials(),
      url,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: CONNECT_TIMEOUT_MS,
        reconnectStrategy: (retries: number) => connected ? Math.min(50 * 2 ** retries, 1_000) : false,
      },
    });
  } catch (e) {
    throw new CliError(`bad Redis URL '${redact(url)}': ${describeError(e)}`, EXIT.USAGE);
  }
  // Without a listener node-redis would throw connection errors from an event; they surface as failed commands.
  client.on("error", () => {});
  // connectTimeout bounds the TCP connect only: a Redis that accepts and never answers (paused, a proxy that holds
  // the bytes) would leave the handshake (CLIENT SETINFO, AUTH, SELECT) waiting forever. So the whole of it is bounded.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const silent = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)), CONNECT_TIMEOUT_MS);
  });
  try {
    await Promise.race([client.connect(), silent]);
  } catch (e) {
    await client.disconnect().catch(() => {});
    throw new CliError(`cannot connect to Redis at ${redact(url)}: ${describeError(e)}`, EXIT.REDIS);
  } finally {
    clearTimeout(timer);
  }
  connected = true;
  return client;
}

/** Close the connection without waiting for Redis (it may be gone). Never throws. */
export async function close(client: RedisClient | undefined): Promise<void> {
  if (!client) return;
  try {
    if (client.isOpen) await client.disconnect();
  } catch { /* already closed */ }
}
