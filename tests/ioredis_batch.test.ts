// The ioredis adapter sends the scripts of one turn of the event loop a few per socket write (ioredis itself writes
// each command on its own: a system call each, most of a busy client's CPU), never holding one past the turn, in the
// order they were called, and as before where the socket cannot be held (a client not connected yet).
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Redis as IORedis } from "ioredis";
import { ioredis } from "../src/adapters/ioredis.ts";
import { acquire, inspect, LockTimeoutError, release } from "../mod.ts";
import { type RedisServer, runProcess, runtimeArgs, runtimeName, settled, startRedis } from "./_redis.ts";

const here = dirname(fileURLToPath(import.meta.url));

let srv: RedisServer;
let n = 0;
const fresh = () => `batch-${runtimeName()}-${Date.now()}-${n++}`;

/** Count the writes that reach `client`'s socket (a write of one chunk, or of several held together). */
function countWrites(client: IORedis): { readonly count: number } {
  const socket = (client as unknown as { stream: Record<string, (...a: unknown[]) => unknown> }).stream;
  const counter = { count: 0 };
  for (const method of ["_write", "_writev"]) {
    const real = socket[method];
    if (typeof real !== "function") continue;
    socket[method] = function (this: unknown, ...a: unknown[]) {
      counter.count++;
      return real.apply(this, a);
    };
  }
  return counter;
}

describe(`ioredis: scripts go out a few per write (${runtimeName()})`, () => {
  before(async () => {
    srv = await startRedis();
  });
  after(async () => {
    await srv.stop();
  });

  test("16 acquires called in one turn reach the socket in a few writes (one each made 16), and all are answered", async () => {
    const client = new IORedis(srv.port, "127.0.0.1");
    try {
      const driver = ioredis(client);
      await release(await acquire(driver, fresh())); // scripts loaded, the first call's INFO sent
      const writes = countWrites(client);
      const leases = await Promise.all(Array.from({ length: 16 }, () => acquire(driver, fresh(), { leaseMs: 10_000 })));
      // 8 and 8 on Node and Deno; Bun ends a turn's held writes sooner (4 writes there, and the INFO a client's early
      // calls send once).
      assert.ok(writes.count <= 6, `${writes.count} writes for 16 scripts`);
      assert.ok(writes.count >= 2, `${writes.count} writes: at most 8 scripts wait for one another`);
      assert.equal(new Set(leases.map((l) => l.fence)).size, 16);
      assert.deepEqual(await Promise.all(leases.map((l) => release(l))), Array(16).fill(true));
    } finally {
      client.disconnect();
    }
  });

  test("scripts held together run in the order they were called", async () => {
    const client = new IORedis(srv.port, "127.0.0.1");
    try {
      const driver = ioredis(client);
      const name = fresh();
      await release(await acquire(driver, fresh()));
      const writes = countWrites(client);
      const tries = await Promise.all(
        Array.from({ length: 12 }, (_, i) => settled(acquire(driver, name, { owner: `o${i}`, waitMs: 0 }))),
      );
      assert.ok(writes.count <= 6, `${writes.count} writes for 12 scripts`);
      assert.ok(tries[0].value?.owner.endsWith(":o0"), `the first called got the lease: ${tries[0].error}`);
      for (const t of tries.slice(1)) assert.ok(t.error instanceof LockTimeoutError, String(t.error));
      assert.equal(await release(tries[0].value!), true);
    } finally {
      client.disconnect();
    }
  });

  test("a client not connected yet (lazyConnect): its first scripts wait in ioredis's queue and are answered", async () => {
    const client = new IORedis(srv.port, "127.0.0.1", { lazyConnect: true });
    try {
      assert.equal(client.status, "wait");
      const driver = ioredis(client);
      const leases = await Promise.all(Array.from({ length: 3 }, () => acquire(driver, fresh(), { waitMs: 5_000 })));
      assert.equal(leases.length, 3);
      for (const l of leases) assert.equal(await release(l), true);
    } finally {
      client.disconnect();
    }
  });

  // A release called just before the process exits (process.exit() in the same turn, or in an "exit" listener, where
  // no later turn comes) went out when it was called, one write each; a socket held until the turn's end never sends it,
  // and the lease stayed held for its whole TTL (60 s here). Deno.exit() runs no process "exit" listener.
  for (const mode of ["exit", "handler-first", "handler-after", ...(runtimeName() === "deno" ? ["deno-exit"] : [])]) {
    test(`a release called as the process exits still reaches Redis (${mode})`, async () => {
      const name = fresh();
      const [cmd, pre] = runtimeArgs(join(here, "fixtures", "ioredis_exit.ts"));
      const r = await runProcess(cmd, [...pre, String(srv.port), name, mode], {
        cwd: join(here, ".."),
        timeoutMs: 30_000,
      });
      assert.equal(r.killed, false, `still running after 30 s; stderr: ${r.stderr}`);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /acquired/);
      const client = new IORedis(srv.port, "127.0.0.1");
      try {
        assert.deepEqual((await inspect(ioredis(client), name)).owners, [], "the lease is still held");
      } finally {
        client.disconnect();
      }
    });
  }
});
