// Valkey GLIDE clients for the tests: from a redis:// URL (credentials included, as the ACL runs of the contract
// give them) or a cluster's seed ports. GLIDE logs every error reply at WARN level to stdout (a NOSCRIPT, a
// WRONGTYPE); the tests keep its errors only.
import {
  GlideClient,
  type GlideClientConfiguration,
  GlideClusterClient,
  type GlideClusterClientConfiguration,
  Logger,
} from "@valkey/valkey-glide";

let quiet = false;

function quieten(): void {
  if (quiet) return;
  quiet = true;
  Logger.setLoggerConfig("error");
}

/**
 * GLIDE's default request timeout is 250 ms; the tests give calls 5 s, as a loaded CI machine (three runtimes on two
 * cores) can take longer than 250 ms to answer, and redlease's own bounds are what the tests are about. The test
 * of WAIT uses a client with the default.
 */
export const TEST_REQUEST_TIMEOUT_MS = 5_000;

/** A connected GlideClient for `url` (`redis://[user:password@]host:port`). */
export function glideClient(url: string, options: Partial<GlideClientConfiguration> = {}): Promise<GlideClient> {
  quieten();
  const u = new URL(url);
  const credentials = u.password
    ? { username: decodeURIComponent(u.username) || undefined, password: decodeURIComponent(u.password) }
    : undefined;
  return GlideClient.createClient({
    addresses: [{ host: u.hostname.replace(/^\[|\]$/g, ""), port: Number(u.port) }],
    requestTimeout: TEST_REQUEST_TIMEOUT_MS,
    ...(credentials ? { credentials } : {}),
    ...options,
  });
}

/** A connected GlideClusterClient seeded with the masters at `ports` on 127.0.0.1 (`options`: credentials, say). */
export function glideCluster(
  ports: readonly number[],
  options: Partial<GlideClusterClientConfiguration> = {},
): Promise<GlideClusterClient> {
  quieten();
  return GlideClusterClient.createClient({
    addresses: ports.map((port) => ({ host: "127.0.0.1", port })),
    requestTimeout: TEST_REQUEST_TIMEOUT_MS,
    ...options,
  });
}
