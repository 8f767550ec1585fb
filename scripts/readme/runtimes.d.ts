// What the Deno and Bun blocks of README.md and docs/ use of those runtimes, for `scripts/check_readme.ts`, which type-checks them
// with Node's types (`@types/node`; no Deno or Bun types are installed). Only the members the blocks use.

declare namespace Deno {
  function writeTextFile(
    path: string | URL,
    data: string,
    options?: { append?: boolean; create?: boolean; mode?: number; signal?: AbortSignal },
  ): Promise<void>;
  /** The environment (`--allow-env`). */
  const env: { get(key: string): string | undefined };
}

declare module "bun" {
  import type { BunRedisClient } from "redlease/bun";
  /** Bun's Redis client: what `redlease/bun` takes, and its constructor (`url` defaults to `$REDIS_URL`). */
  export const RedisClient: new (url?: string) => BunRedisClient;
  /** The client configured by `$REDIS_URL`. */
  export const redis: BunRedisClient;
}
