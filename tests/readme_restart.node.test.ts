// README's first example (the ```ts block after the `<!-- first example` comment), run as a user would run it, while
// the redis-server it uses is restarted under it (SIGKILL, then a fresh empty server on the same port): the process
// survives, the round that held the lease reports it lost (its hold vanished with the server's memory), and the next
// round acquires as usual, as README says; with an append-only file fsynced on every write, the lease comes back
// with the server and is kept. The same block without its `client.on("error", …)` line ends the process:
// that is what the line is for, and what would make the first case fail if README dropped it.
// Node only: it runs README's Node instructions (tsx), on node-redis v5 (what `npm install redis` installs) and v4.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type RedisServer, startRedis } from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** README's first example: the first ```ts block after the `<!-- first example` comment. */
function firstExample(): string {
  const lines = readFileSync(join(root, "README.md"), "utf8").split("\n");
  const marker = lines.findIndex((l) => l.startsWith("<!-- first example"));
  assert.ok(marker >= 0, "README.md has no '<!-- first example' comment");
  const open = lines.findIndex((l, i) => i > marker && l === "```ts");
  const close = lines.findIndex((l, i) => i > open && l === "```");
  assert.ok(open > marker && close > open, "no ```ts block after README's '<!-- first example' comment");
  return lines.slice(open + 1, close).join("\n") + "\n";
}

/** The main file of an installed package (tsx resolves a path to a file, not to a package's directory). */
function main(pkg: string): string {
  const dir = join(root, "node_modules", pkg);
  return join(dir, JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).main);
}

/** The example as a file of its own, `redlease` and `redis` (node-redis `redisPkg`) imported from this checkout. */
function write(code: string, redisPkg: "redis" | "redis5"): string {
  const dir = mkdtempSync(join(tmpdir(), "redlease-readme-restart-"));
  dirs.push(dir);
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
  const file = join(dir, "main.ts");
  writeFileSync(
    file,
    code.replace(/from "redlease"/g, `from ${JSON.stringify(join(root, "mod.ts"))}`)
      .replace(/from "redis"/g, `from ${JSON.stringify(main(redisPkg))}`),
  );
  return file;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `file` against `server`, restarting the server once the first round holds the lease. */
async function runThroughRestart(file: string, server: RedisServer): Promise<Run> {
  const child = spawn(process.execPath, ["--import", "tsx", file], {
    cwd: dirname(file),
    env: { ...process.env, REDIS_URL: server.url, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  const killer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  try {
    await waitUntil(
      "round 1 holds the lease",
      30_000,
      () => Promise.resolve(stdout.includes("round 1: holding") || stdout),
      5,
    );
    await server.restart(200);
    return { code: await exited, stdout, stderr };
  } finally {
    clearTimeout(killer);
    child.kill("SIGKILL");
  }
}

describe("README's first example through a Redis restart", { concurrency: true }, () => {
  const code = firstExample();
  const listener = /^client\.on\("error",.*\n/m;

  test("the example registers an error listener on its client", () => {
    assert.match(code, listener);
  });

  for (const redisPkg of ["redis5", "redis"] as const) {
    const label = redisPkg === "redis5" ? "node-redis v5" : "node-redis v4";

    test(`${label}: survives, reports the hold lost, and the next round acquires`, async () => {
      const server = await startRedis();
      try {
        const r = await runThroughRestart(write(code, redisPkg), server);
        const out = `--- stdout\n${r.stdout}--- stderr\n${r.stderr}`;
        assert.equal(r.code, 0, out);
        // The round that held the lease when Redis restarted: lost, and its work stopped.
        assert.match(r.stdout, /^round 1: lease lost, work stopped: /m, out);
        assert.doesNotMatch(r.stdout, /^round 1: done/m, out);
        // The next rounds take the lease again and finish their work.
        assert.match(r.stdout, /^round 2: holding the lease, fence \d+$/m, out);
        assert.match(r.stdout, /^round 3: done$/m, out);
        // The restart reached the client's listener, and nothing went unhandled.
        assert.match(r.stderr, /^redis: /m, out);
        assert.doesNotMatch(r.stderr, /Unhandled|Uncaught|node:internal/, out);
      } finally {
        await server.stop();
      }
    });
  }

  test("node-redis v5, Redis with an fsynced append-only file: the lease comes back with it and is kept", async () => {
    const server = await startRedis(["--appendonly", "yes", "--appendfsync", "always"]);
    try {
      const r = await runThroughRestart(write(code, "redis5"), server);
      const out = `--- stdout\n${r.stdout}--- stderr\n${r.stderr}`;
      assert.equal(r.code, 0, out);
      assert.match(r.stdout, /^round 1: done$/m, out);
      assert.doesNotMatch(r.stdout, /lease lost/, out);
      assert.match(r.stdout, /^round 3: done$/m, out);
      assert.match(r.stderr, /^redis: /m, out);
    } finally {
      await server.stop();
    }
  });

  test("node-redis v5: the same block without its error listener ends the process at the restart", async () => {
    const server = await startRedis();
    try {
      const r = await runThroughRestart(write(code.replace(listener, ""), "redis5"), server);
      const out = `--- stdout\n${r.stdout}--- stderr\n${r.stderr}`;
      assert.notEqual(r.code, 0, out);
      assert.doesNotMatch(r.stdout, /^round 3: done$/m, out);
    } finally {
      await server.stop();
    }
  });
});
