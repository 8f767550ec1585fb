// The published package, as a user gets it: build with tsup, `npm pack`, install the tarball into a fresh
// project next to redis@4, then acquire and release a real lease from Node ESM, Node CommonJS, Bun and Deno
// (each importing "redlease" and "redlease/node-redis" from that project's node_modules), and type-check a
// consumer against the shipped .d.ts / .d.cts. Node only: the other runtimes run as child processes.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { entries } from "../tsup.config.ts";
import { type Ran, type RedisServer, runProcess, startRedis } from "./_redis.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = (name: string) => join(root, "node_modules", ".bin", name);

// The child npm must work on the temporary project, not on the repo whose `npm test` may be running this.
const env: Record<string, string | undefined> = { ...process.env, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" };
for (const k of Object.keys(env)) {
  if (/^npm_(package|lifecycle)_|^npm_config_(prefix|local_prefix|global|location)$|^INIT_CWD$/.test(k)) delete env[k];
}

function run(cmd: string, args: string[], cwd: string, timeoutMs: number): Promise<Ran> {
  return runProcess(cmd, args, { cwd, env, timeoutMs });
}

function ok(r: Ran, what: string): Ran {
  const out = `\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
  assert.equal(r.killed, false, `${what} timed out${out}`);
  assert.equal(r.code, 0, `${what} exited with ${r.code}${out}`);
  return r;
}

// Acquire a lease with the plain client, see a second acquire through the node-redis subpath's driver time
// out with the root's LockTimeoutError, release, re-acquire through the driver (a higher fence), release.
const body = (imports: string) =>
  `${imports}
const [url, label] = process.argv.slice(2);
const client = await createClient({ url }).connect();
const driver = nodeRedis(client);
const name = "pkg:" + label;
const held = await acquire(client, name, { waitMs: 5000 });
let timedOut = false;
try {
  await acquire(driver, name, { waitMs: 0 });
} catch (err) {
  timedOut = err instanceof LockTimeoutError;
}
const first = await release(held);
const again = await acquire(driver, name, { waitMs: 0 });
const fenced = again.fence > held.fence;
const second = await release(again);
await client.quit();
console.log("redlease ok " + label + ": released=" + first + "," + second + " timedOut=" + timedOut + " fenced=" + fenced);
`;

const esm = body(`import process from "node:process";
import { createClient } from "redis";
import { acquire, LockTimeoutError, release } from "redlease";
import { nodeRedis } from "redlease/node-redis";`);

const cjs = `const process = require("node:process");
const { createClient } = require("redis");
const { acquire, LockTimeoutError, release } = require("redlease");
const { nodeRedis } = require("redlease/node-redis");
(async () => {
${body("")}
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
`;

// A consumer type-checked under node16 resolution: `.mts` resolves the "import" types (.d.ts), `.cts` the
// "require" types (.d.cts). redis is not imported, so skipLibCheck can stay off and our declarations are checked.
const consumer =
  `import { acquire, type AcquireOptions, type Lease, LockTimeoutError, type NodeRedisClient, release, withLock } from "redlease";
import { nodeRedis } from "redlease/node-redis";
import type { Driver } from "redlease/node-redis";

export async function use(client: NodeRedisClient, options: AcquireOptions): Promise<number> {
  const driver: Driver = nodeRedis(client);
  try {
    const lease: Lease = await acquire(driver, "types", options);
    const released: boolean = await release(lease);
    return released ? lease.fence : withLock(driver, "types", (signal: AbortSignal, l: Lease) => signal.aborted ? 0 : l.fence);
  } catch (err) {
    if (err instanceof LockTimeoutError) return -err.remainingMs;
    throw err;
  }
}
`;

const wanted = /^redlease ok (\S+): released=true,true timedOut=true fenced=true$/m;

describe("npm package (built, packed and installed)", () => {
  let srv: RedisServer;
  let tmp: string;
  let project: string;
  let built: string[] = [];

  before(async () => {
    srv = await startRedis();
    tmp = mkdtempSync(join(tmpdir(), "redlease-pkg-"));
    project = join(tmp, "project");
    mkdirSync(project);

    // Adapters still being written are skipped by the build (and reported by check_exports): note which
    // sources exist before building, so one that appears meanwhile is not expected in the tarball.
    built = Object.entries(entries).filter(([, src]) => existsSync(join(root, src))).map(([name]) => name);
    ok(await run(bin("tsup"), [], root, 120_000), "tsup");
    const packed = ok(
      await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", tmp], root, 60_000),
      "npm pack",
    );
    const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    const files = new Set(info.files.map((f) => f.path));
    for (const name of built) {
      for (const ext of [".js", ".cjs", ".d.ts", ".d.cts"]) {
        assert.ok(files.has(`dist/${name}${ext}`), `the tarball lacks dist/${name}${ext}`);
      }
    }

    writeFileSync(
      join(project, "package.json"),
      JSON.stringify({ name: "redlease-consumer", private: true, type: "module" }, null, 2),
    );
    writeFileSync(join(project, "deno.json"), JSON.stringify({ nodeModulesDir: "manual" }, null, 2));
    writeFileSync(join(project, "check.mjs"), esm);
    writeFileSync(join(project, "check.cjs"), cjs);
    writeFileSync(join(project, "use.mts"), consumer);
    writeFileSync(join(project, "use.cts"), consumer);
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "node16",
          moduleResolution: "node16",
          target: "ES2022",
          lib: ["ES2022", "ESNext.Disposable", "DOM"],
          types: [],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
        },
        files: ["use.mts", "use.cts"],
      }),
    );

    // The npm cache has redis@4 (the repo installed it), so try without the network first.
    const install = ["install", join(tmp, info.filename), "redis@4", "--no-audit", "--no-fund"];
    let r = await run("npm", [...install, "--offline"], project, 90_000);
    if (r.code !== 0) r = await run("npm", [...install, "--prefer-offline"], project, 90_000);
    ok(r, "npm install");
  }, { timeout: 150_000 });

  after(async () => {
    await srv?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  const cases: Array<[string, () => [string, string[]]]> = [
    ["Node ESM (import)", () => [process.execPath, ["check.mjs", srv.url, "node-esm"]]],
    ["Node CommonJS (require)", () => [process.execPath, ["check.cjs", srv.url, "node-cjs"]]],
    ["Bun", () => [bin("bun"), ["check.mjs", srv.url, "bun"]]],
    ["Deno (npm package from node_modules)", () => [bin("deno"), ["run", "-A", "check.mjs", srv.url, "deno"]]],
  ];
  for (const [title, command] of cases) {
    test(`${title} acquires and releases a lease through "redlease" and "redlease/node-redis"`, {
      timeout: 90_000,
    }, async () => {
      const [cmd, args] = command();
      const r = ok(await run(cmd, args, project, 60_000), title);
      const m = wanted.exec(r.stdout);
      assert.ok(m, `unexpected output from ${title}:\n${r.stdout}\n${r.stderr}`);
      assert.equal(m[1], args.at(-1));
    });
  }

  test("the installed bin runs: `redlease run` holds a lease for a command, on Node and Bun", {
    timeout: 90_000,
  }, async () => {
    const redleaseBin = join(project, "node_modules", ".bin", "redlease");
    const help = ok(await run(redleaseBin, ["--help"], project, 30_000), "redlease --help");
    assert.match(help.stdout, /redlease run NAME/);
    const child = [process.execPath, "-e", "process.stdout.write('fence=' + process.env.REDLEASE_FENCE)"];
    const viaNode = ok(await run(redleaseBin, ["run", "--url", srv.url, "pkg-bin", "--", ...child], project, 30_000), "run");
    assert.match(viaNode.stdout, /fence=\d+/);
    const viaBun = ok(
      await run(bin("bun"), [redleaseBin, "run", "--url", srv.url, "pkg-bin", "--", ...child], project, 30_000),
      "bun run",
    );
    assert.match(viaBun.stdout, /fence=\d+/);
  });

  test("every built subpath loads on Node with import and with require, exporting the same names", {
    timeout: 90_000,
  }, async () => {
    assert.ok(built.length > 0);
    for (const name of built) {
      const specifier = name === "mod" ? "redlease" : `redlease/${name}`;
      const list = "(m) => console.log(Object.keys(m).filter((k) => k !== 'default').sort().join(','))";
      const viaImport = ok(
        await run(
          process.execPath,
          ["--input-type=module", "-e", `import * as m from "${specifier}"; (${list})(m);`],
          project,
          30_000,
        ),
        `import "${specifier}"`,
      );
      const viaRequire = ok(
        await run(
          process.execPath,
          ["--input-type=commonjs", "-e", `(${list})(require("${specifier}"));`],
          project,
          30_000,
        ),
        `require("${specifier}")`,
      );
      assert.notEqual(viaImport.stdout.trim(), "", `"${specifier}" exports nothing`);
      assert.equal(viaRequire.stdout.trim(), viaImport.stdout.trim(), `"${specifier}": require and import differ`);
    }
  });

  test("a TypeScript consumer type-checks against the .d.ts (import) and .d.cts (require) declarations", {
    timeout: 90_000,
  }, async () => {
    ok(await run(bin("tsc"), ["-p", "tsconfig.json"], project, 60_000), "tsc");
  });
});
