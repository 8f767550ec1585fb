// The published package, as a user gets it: build with tsup, `npm pack`, install the tarball into a fresh
// project next to node-redis v5 as its peer `redis` (npm must not answer ERESOLVE), then acquire and release a real
// lease from Node ESM, Node CommonJS, Bun and Deno (each importing "redlease" and "redlease/node-redis" from that
// project's node_modules), and type-check consumers against the shipped .d.ts / .d.cts; see "redlease/otel" record
// through the project's @opentelemetry/api (its optional peer) on the same runtimes, and a project without that peer
// load every other entry; "redlease/glide" wake a waiter through the project's @valkey/valkey-glide (its optional peer,
// installed with the native package of this platform); and the same install and Node run next to node-redis v4. Node
// only: the other runtimes run as child processes.
//
// node-redis is installed from the repo's own copies, packed with what they depend on (node_modules/redis5 is
// redis@5 and node_modules/redis redis@4, each with its @redis/* packages), and so are @opentelemetry/api and
// @valkey/valkey-glide (with its native package for this platform, an optional dependency of it), so no registry is
// needed; only if that install fails for another reason than ERESOLVE are the same versions taken from the
// npm registry.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { acquire, release } from "../mod.ts";
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

const readJson = (file: string) => JSON.parse(readFileSync(file, "utf8"));

/** Where Node finds package `name` from package directory `dir` (its node_modules, then its parents' up to the repo). */
function resolveFrom(dir: string, name: string): string | undefined {
  for (let at = dir;; at = dirname(at)) {
    const candidate = join(at, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    if (at === root || dirname(at) === at) return undefined;
  }
}

/** Pack `dir` (a package under the repo's node_modules) and every package it depends on into `dest`. */
async function packTree(dir: string, dest: string): Promise<string[]> {
  const dirs = new Set<string>();
  const visit = (d: string) => {
    if (dirs.has(d)) return;
    dirs.add(d);
    const pkg = readJson(join(d, "package.json"));
    for (const name of Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies })) {
      const found = resolveFrom(d, name);
      if (found) visit(found);
      else if (!(name in (pkg.optionalDependencies ?? {}))) {
        throw new Error(`${name}, a dependency of ${d}, is not installed`);
      }
    }
  };
  visit(dir);
  mkdirSync(dest, { recursive: true });
  const packed = ok(
    await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", dest, ...dirs], root, 60_000),
    "npm pack",
  );
  return (JSON.parse(packed.stdout) as Array<{ filename: string }>).map((p) => join(dest, p.filename));
}

/**
 * Install the redlease tarball into `project` next to the node-redis in `redisDir` (as `redis`, its peer) and the
 * packages in `also` (directories under the repo's node_modules: other peers), as a user's
 * `npm install redlease redis@<major>` does; fails on ERESOLVE, and when `npm ls` finds a peer unmet.
 */
async function installWithPeer(project: string, tarball: string, redisDir: string, also: string[] = []): Promise<Ran> {
  const flags = ["--no-audit", "--no-fund"];
  let r: Ran;
  try {
    const dest = join(project, "..", `${basename(project)}-deps`);
    const local: string[] = [];
    for (const dir of [redisDir, ...also]) local.push(...await packTree(dir, dest));
    r = await run("npm", ["install", tarball, ...local, ...flags, "--offline"], project, 90_000);
  } catch (e) {
    r = { code: 1, stdout: "", stderr: String(e), killed: false, ms: 0 };
  }
  assert.doesNotMatch(r.stderr, /ERESOLVE/, `npm install refused the peer:\n${r.stderr}`);
  if (r.code !== 0) {
    const version = (dir: string) => readJson(join(dir, "package.json")).version;
    const named = also.map((dir) => `${readJson(join(dir, "package.json")).name}@${version(dir)}`);
    r = await run(
      "npm",
      ["install", tarball, `redis@${version(redisDir)}`, ...named, ...flags, "--prefer-offline"],
      project,
      90_000,
    );
  }
  ok(r, "npm install");
  assert.doesNotMatch(r.stderr, /ERESOLVE/, r.stderr);
  ok(await run("npm", ["ls", "--all"], project, 60_000), "npm ls (no missing or invalid peer)");
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

// redlease/otel through the project's @opentelemetry/api: a stand-in meter provider (the project has the API, not the
// SDK) registered as the global one, which otel() looks up; one lease acquired and released, then the observable
// instruments read as a reader would. Prints the instruments recorded and the sum of `redlease.lease.held` (0 once
// released).
const otelBody = `
const [url, label] = process.argv.slice(2);
const seen = {};
const callbacks = [];
const instrument = (name) => {
  const record = (value, attributes) => (seen[name] ??= []).push([value, attributes]);
  return { add: record, record };
};
const observable = (name) => ({
  addCallback: (cb) => callbacks.push(() => cb({ observe: (value, attributes) => (seen[name] ??= []).push([value, attributes]) })),
});
const meter = {
  createHistogram: instrument,
  createCounter: instrument,
  createUpDownCounter: instrument,
  createObservableCounter: observable,
  createObservableUpDownCounter: observable,
};
if (!metrics.setGlobalMeterProvider({ getMeter: () => meter })) throw new Error("a global meter provider already");
const client = await createClient({ url }).connect();
configure(client, { onEvent: otel() });
await release(await acquire(client, "pkg:otel:" + label));
await client.quit();
for (const collect of callbacks) collect();
const held = (seen["redlease.lease.held"] ?? []).reduce((s, [v]) => s + v, 0);
console.log(JSON.stringify({ label, instruments: Object.keys(seen).sort(), held }));
`;

const otelEsm = `import process from "node:process";
import { metrics } from "@opentelemetry/api";
import { createClient } from "redis";
import { acquire, configure, release } from "redlease";
import { otel } from "redlease/otel";
${otelBody}`;

const otelCjs = `const process = require("node:process");
const { metrics } = require("@opentelemetry/api");
const { createClient } = require("redis");
const { acquire, configure, release } = require("redlease");
const { otel } = require("redlease/otel");
(async () => {
${otelBody}
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
`;

// A consumer type-checked under node16 resolution: `.mts` resolves the "import" types (.d.ts), `.cts` the
// "require" types (.d.cts). redis is not imported, so skipLibCheck can stay off and our declarations are checked.
const consumer =
  `import { acquire, type AcquireOptions, configure, isLeaseLostError, type Lease, LockTimeoutError, type NodeRedisClient, release, withLock } from "redlease";
import { nodeRedis } from "redlease/node-redis";
import type { Driver } from "redlease/node-redis";
import { type LeaseEvent, otel, type OtelOptions } from "redlease/otel";

export function observe(client: NodeRedisClient, options: OtelOptions): void {
  const record = otel(options);
  configure(client, { onEvent: (e: LeaseEvent) => record(e) });
}

export async function use(client: NodeRedisClient, options: AcquireOptions): Promise<number> {
  const driver: Driver = nodeRedis(client);
  try {
    const lease: Lease = await acquire(driver, "types", options);
    const released: boolean = await release(lease);
    return released ? lease.fence : withLock(driver, "types", (signal: AbortSignal, l: Lease) => signal.aborted ? 0 : l.fence);
  } catch (err) {
    if (err instanceof LockTimeoutError) return -err.remainingMs;
    if (isLeaseLostError(err)) return err.why === "expired" ? -1 : -2; // the guard narrows the type
    throw err;
  }
}
`;

// Two copies of the library in one process, as when one dependency imports "redlease" and another requires it:
// the ESM build (dist/mod.js) and the CommonJS build (dist/mod.cjs) each define the error classes. For an error
// of each class made by one copy, and a real LockTimeoutError from a busy lease acquired through the other, print
// whether `instanceof` and the guard of the other copy recognise it.
const guards = `import process from "node:process";
import { createRequire } from "node:module";
import { createClient } from "redis";
import * as esm from "redlease";
const cjs = createRequire(import.meta.url)("redlease");
const args = {
  RedleaseError: ["n", "m"],
  LockTimeoutError: ["n", 10, 20],
  RedisUnavailableError: ["n", "m"],
  RedisTimeoutError: ["n", 10],
  LeaseLostError: ["n", "expired"],
  LeaseKindError: ["n", "mismatch", 3],
  ReplicationError: ["n", 0, 1],
  QuorumError: ["n", 1, 2, []],
};
const seen = (err, by, name) => ({ instanceof: err instanceof by[name], guard: by["is" + name](err) });
const result = {};
for (const [name, a] of Object.entries(args)) {
  result[name] = {
    twoCopies: esm[name] !== cjs[name],
    esmErrorSeenByCjs: seen(new esm[name](...a), cjs, name),
    cjsErrorSeenByEsm: seen(new cjs[name](...a), esm, name),
    plainErrorSeenByEsm: seen(Object.assign(new Error("m"), { name, lockName: "n" }), esm, name),
  };
}
const client = await createClient({ url: process.argv[2] }).connect();
const name = "pkg:guards:" + process.argv[3];
const held = await esm.acquire(client, name);
const busy = await cjs.acquire(client, name, { waitMs: 0 }).then(() => null, (e) => e);
await esm.release(held);
await client.quit();
result.real = {
  name: busy?.name,
  byCjs: seen(busy, cjs, "LockTimeoutError"),
  byEsm: seen(busy, esm, "LockTimeoutError"),
};
console.log(JSON.stringify(result));
`;

// The same declarations against node-redis v5's own types (the installed peer): its clients are taken as they are,
// a pending connect() is not. Checked with skipLibCheck: node-redis's own .d.ts files need @types/node, which this
// project does not install.
const withRedis5 = `import { createClient, createCluster, createSentinel } from "redis";
import { acquire, release, withLock } from "redlease";
import { nodeRedis } from "redlease/node-redis";

export async function v5(url: string): Promise<boolean> {
  const client = await createClient({ url }).connect();
  const cluster = createCluster({ rootNodes: [{ url }] });
  const sentinel = createSentinel({ name: "mymaster", sentinelRootNodes: [{ host: "127.0.0.1", port: 26379 }] });
  // @ts-expect-error connect() resolves to the client: it must be awaited
  await acquire(createClient({ url }).connect(), "types");
  await withLock(nodeRedis(cluster), "types", () => 1);
  await withLock(sentinel, "types", () => 1);
  return release(await acquire(client, "types"));
}
`;

// redlease/glide through the project's @valkey/valkey-glide: a holder and a waiter on two GlideClients, the waiter
// handed the lease by the release's message (GLIDE 2.3+ subscribes at run time), a wrong client refused.
const glideBody = `
const [url, label] = process.argv.slice(2);
const { hostname, port } = new URL(url);
Logger.setLoggerConfig("error");
const connect = () => GlideClient.createClient({ addresses: [{ host: hostname, port: Number(port) }], requestTimeout: 5000 });
const [a, b] = [await connect(), await connect()];
const name = "pkg:glide:" + label;
const held = await acquire(glide(a), name);
const waiting = acquire(glide(b), name, { waitMs: 10000 });
await new Promise((r) => setTimeout(r, 300));
const t0 = performance.now();
await release(held);
const next = await waiting;
const handoffMs = Math.round(performance.now() - t0);
await release(next);
let refused = false;
try {
  glide({});
} catch (err) {
  refused = err instanceof TypeError;
}
a.close();
b.close();
console.log(JSON.stringify({ label, fenced: next.fence > held.fence, woken: handoffMs < 250, refused }));
`;

const glideEsm = `import process from "node:process";
import { GlideClient, Logger } from "@valkey/valkey-glide";
import { acquire, release } from "redlease";
import { glide } from "redlease/glide";
${glideBody}`;

const glideCjs = `const process = require("node:process");
const { GlideClient, Logger } = require("@valkey/valkey-glide");
const { acquire, release } = require("redlease");
const { glide } = require("redlease/glide");
(async () => {
${glideBody}
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
`;

// The GLIDE adapter's declarations against GLIDE's own types (skipLibCheck: GLIDE's .d.ts need @types/node).
const withGlide = `import { GlideClient, GlideClusterClient } from "@valkey/valkey-glide";
import { acquire, release } from "redlease";
import { glide } from "redlease/glide";

export async function valkey(host: string): Promise<boolean> {
  const client = await GlideClient.createClient({ addresses: [{ host }] });
  const cluster = await GlideClusterClient.createClient({ addresses: [{ host }] });
  // @ts-expect-error a GLIDE client is wrapped with glide()
  await acquire(client, "types");
  await release(await acquire(glide(cluster), "types"));
  return release(await acquire(glide(client), "types"));
}
`;

const wanted = /^redlease ok (\S+): released=true,true timedOut=true fenced=true$/m;

describe("npm package (built, packed and installed)", () => {
  let srv: RedisServer;
  let tmp: string;
  let project: string;
  let tarball: string;
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
    writeFileSync(join(project, "guards.mjs"), guards);
    writeFileSync(join(project, "otel.mjs"), otelEsm);
    writeFileSync(join(project, "otel.cjs"), otelCjs);
    writeFileSync(join(project, "use.mts"), consumer);
    writeFileSync(join(project, "use.cts"), consumer);
    writeFileSync(join(project, "redis5.mts"), withRedis5);
    writeFileSync(join(project, "glide.mjs"), glideEsm);
    writeFileSync(join(project, "glide.cjs"), glideCjs);
    writeFileSync(join(project, "glide.mts"), withGlide);
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
    writeFileSync(
      join(project, "tsconfig.redis5.json"),
      JSON.stringify({ extends: "./tsconfig.json", compilerOptions: { skipLibCheck: true }, files: ["redis5.mts"] }),
    );
    writeFileSync(
      join(project, "tsconfig.glide.json"),
      JSON.stringify({ extends: "./tsconfig.json", compilerOptions: { skipLibCheck: true }, files: ["glide.mts"] }),
    );

    tarball = join(tmp, info.filename);
    await installWithPeer(project, tarball, join(root, "node_modules", "redis5"), [
      join(root, "node_modules", "@opentelemetry", "api"),
      join(root, "node_modules", "@valkey", "valkey-glide"),
    ]);
    assert.equal(readJson(join(project, "node_modules", "redis", "package.json")).version.split(".")[0], "5");
  }, { timeout: 180_000 });

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

  const runtimes: Array<[string, string, string[]]> = [
    ["Node", process.execPath, []],
    ["Bun", bin("bun"), []],
    ["Deno", bin("deno"), ["run", "-A"]],
  ];
  for (const [title, cmd, pre] of runtimes) {
    test(`${title}: the ESM and CommonJS builds fail each other's instanceof; the is…Error guards hold across`, {
      timeout: 90_000,
    }, async () => {
      const r = ok(await run(cmd, [...pre, "guards.mjs", srv.url, title], project, 60_000), `${title} guards.mjs`);
      const result = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
      const across = { instanceof: false, guard: true };
      const classes = Object.keys(result).filter((k) => k !== "real");
      assert.equal(classes.length, 8, "every error class of mod.ts");
      for (const name of classes) {
        assert.deepEqual(result[name], {
          twoCopies: true,
          esmErrorSeenByCjs: across,
          cjsErrorSeenByEsm: across,
          plainErrorSeenByEsm: { instanceof: false, guard: false },
        }, name);
      }
      assert.deepEqual(result.real, {
        name: "LockTimeoutError",
        byCjs: { instanceof: true, guard: true },
        byEsm: across,
      });
    });
  }

  const otelRuns: Array<[string, () => [string, string[]]]> = [
    ["Node ESM", () => [process.execPath, ["otel.mjs", srv.url, "node-esm"]]],
    ["Node CommonJS", () => [process.execPath, ["otel.cjs", srv.url, "node-cjs"]]],
    ["Bun", () => [bin("bun"), ["otel.mjs", srv.url, "bun"]]],
    ["Deno", () => [bin("deno"), ["run", "-A", "otel.mjs", srv.url, "deno"]]],
  ];
  test('"redlease/otel" records through the project\'s @opentelemetry/api on Node (ESM, CommonJS), Bun and Deno', {
    timeout: 120_000,
  }, async () => {
    for (const [title, command] of otelRuns) {
      const [cmd, args] = command();
      const r = ok(await run(cmd, args, project, 60_000), title);
      assert.deepEqual(JSON.parse(r.stdout.trim().split("\n").at(-1)!), {
        label: args.at(-1),
        instruments: [
          "redlease.lease.acquisitions",
          "redlease.lease.held",
          "redlease.lease.hold.duration",
          "redlease.lease.wait.duration",
        ],
        held: 0,
      }, title);
    }
  });

  test(
    '"redlease/glide" hands a lease over through the project\'s @valkey/valkey-glide on Node (ESM, CommonJS), Bun and Deno',
    {
      timeout: 120_000,
    },
    async () => {
      const native = readdirSync(join(project, "node_modules", "@valkey")).filter((d) => d !== "valkey-glide");
      assert.ok(native.length === 1 && native[0].startsWith("valkey-glide-"), `GLIDE's native package: ${native}`);
      const runs: Array<[string, string, string[]]> = [
        ["Node ESM", process.execPath, ["glide.mjs"]],
        ["Node CommonJS", process.execPath, ["glide.cjs"]],
        ["Bun", bin("bun"), ["glide.mjs"]],
        ["Deno", bin("deno"), ["run", "-A", "glide.mjs"]],
      ];
      for (const [title, cmd, args] of runs) {
        const r = ok(await run(cmd, [...args, srv.url, title], project, 60_000), title);
        assert.deepEqual(
          JSON.parse(r.stdout.trim().split("\n").at(-1)!),
          { label: title, fenced: true, woken: true, refused: true },
          title,
        );
      }
      ok(await run(bin("tsc"), ["-p", "tsconfig.glide.json"], project, 60_000), "tsc (GLIDE's types)");
    },
  );

  test("the installed bin runs: `redlease run` holds a lease for a command, on Node and Bun", {
    timeout: 90_000,
  }, async () => {
    const redleaseBin = join(project, "node_modules", ".bin", "redlease");
    const help = ok(await run(redleaseBin, ["--help"], project, 30_000), "redlease --help");
    assert.match(help.stdout, /redlease run NAME/);
    const child = [process.execPath, "-e", "process.stdout.write('fence=' + process.env.REDLEASE_FENCE)"];
    const viaNode = ok(
      await run(redleaseBin, ["run", "--url", srv.url, "pkg-bin", "--", ...child], project, 30_000),
      "run",
    );
    assert.match(viaNode.stdout, /fence=\d+/);
    const viaBun = ok(
      await run(bin("bun"), [redleaseBin, "run", "--url", srv.url, "pkg-bin", "--", ...child], project, 30_000),
      "bun run",
    );
    assert.match(viaBun.stdout, /fence=\d+/);
  });

  test(
    "the bin alone: with only the tarball installed (no redis), `redlease inspect` runs on Node, Bun and Deno, and through npm exec",
    {
      timeout: 150_000,
    },
    async () => {
      // A project with nothing but redlease: node-redis is an optional peer, so npm does not install it; the CLI
      // carries its own copy (tsup.config.ts).
      const bare = join(tmp, "bare");
      mkdirSync(bare);
      writeFileSync(
        join(bare, "package.json"),
        JSON.stringify({ name: "redlease-bin-only", private: true, type: "module" }),
      );
      writeFileSync(join(bare, "deno.json"), JSON.stringify({ nodeModulesDir: "manual" }));
      ok(
        await run("npm", ["install", tarball, "--no-audit", "--no-fund", "--offline"], bare, 90_000),
        "npm install (tarball only)",
      );
      assert.deepEqual(readdirSync(join(bare, "node_modules")).filter((d) => !d.startsWith(".")), ["redlease"]);
      const dist = readFileSync(join(bare, "node_modules", "redlease", "dist", "cli.js"), "utf8");
      assert.doesNotMatch(
        dist,
        /from\s*["'](redis|@redis\/client)["']|require\(["'](redis|@redis\/client)["']\)/,
        "node-redis is bundled",
      );
      assert.match(dist, /RedisSocket/, "node-redis's client is in dist/cli.js");
      // …and only there: the library's entries and chunks keep `redis` an optional peer.
      const distDir = join(bare, "node_modules", "redlease", "dist");
      for (const file of readdirSync(distDir).filter((f) => /\.c?js$/.test(f) && f !== "cli.js")) {
        const code = readFileSync(join(distDir, file), "utf8");
        assert.doesNotMatch(code, /RedisSocket/, `dist/${file} bundles node-redis`);
        // @opentelemetry/api is redlease/otel's alone: nothing else loads it.
        if (!/^otel\.c?js$/.test(file)) assert.doesNotMatch(code, /@opentelemetry/, `dist/${file} loads OpenTelemetry`);
      }
      // Without @opentelemetry/api (an optional peer, not installed), the entries load; redlease/otel says what it lacks.
      for (const type of ["module", "commonjs"]) {
        const load = (spec: string) =>
          type === "module" ? `await import(${JSON.stringify(spec)})` : `require(${JSON.stringify(spec)})`;
        for (const name of built.filter((b) => b !== "otel")) {
          const spec = name === "mod" ? "redlease" : `redlease/${name}`;
          ok(await run(process.execPath, [`--input-type=${type}`, "-e", load(spec)], bare, 30_000), `${type}: ${spec}`);
        }
        const r = await run(process.execPath, [`--input-type=${type}`, "-e", load("redlease/otel")], bare, 30_000);
        assert.notEqual(r.code, 0);
        assert.match(r.stderr, /Cannot find (module|package) '@opentelemetry\/api'/, r.stderr);
      }

      // A labelled hold for it to show.
      const client = await srv.client();
      const name = "pkg:bin-only";
      const lease = await acquire(client, name, { label: "packaged job" });
      try {
        const args = ["inspect", "pkg:*", "--url", srv.url];
        const wantedOut = new RegExp(
          `^redis://127\\.0\\.0\\.1:${srv.port}/0, prefix 'redlease': 1 held lease matches 'pkg:\\*'\n` +
            `NAME .* HOLDER\n${name} +exclusive .* packaged job\n$`,
        );
        const redleaseBin = join(bare, "node_modules", ".bin", "redlease");
        // npx / npm exec from a directory with no project, with a cache of its own: the tarball as a user's
        // `npx -p redlease redlease` gets the package.
        const empty = join(tmp, "empty");
        mkdirSync(empty);
        const npxEnv = { ...env, npm_config_cache: join(tmp, "npm-cache") };
        const ways: Array<[string, () => Promise<Ran>]> = [
          ["Node (node_modules/.bin)", () => run(redleaseBin, args, bare, 30_000)],
          ["Bun", () => run(bin("bun"), [redleaseBin, ...args], bare, 30_000)],
          [
            "Deno (npm:redlease)",
            () => run(bin("deno"), ["run", "-A", "--cached-only", "npm:redlease", ...args], bare, 60_000),
          ],
          [
            "npm exec --package=<tarball> (npx -p)",
            () =>
              runProcess("npm", ["exec", "--offline", "--yes", `--package=${tarball}`, "--", "redlease", ...args], {
                cwd: empty,
                env: npxEnv,
                timeoutMs: 90_000,
              }),
          ],
        ];
        for (const [title, way] of ways) {
          const r = ok(await way(), title);
          assert.match(r.stdout, wantedOut, `${title}:\n${r.stdout}\n${r.stderr}`);
        }
      } finally {
        await release(lease);
      }
    },
  );

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

  test("a TypeScript consumer of node-redis v5 type-checks: its clients are taken, a pending connect() is not", {
    timeout: 90_000,
  }, async () => {
    ok(await run(bin("tsc"), ["-p", "tsconfig.redis5.json"], project, 60_000), "tsc");
  });

  test("with node-redis v4 as the peer instead: installs without ERESOLVE, and Node acquires and releases", {
    timeout: 150_000,
  }, async () => {
    const project4 = join(tmp, "project4");
    mkdirSync(project4);
    writeFileSync(
      join(project4, "package.json"),
      JSON.stringify({ name: "redlease-consumer-v4", private: true, type: "module" }, null, 2),
    );
    writeFileSync(join(project4, "check.mjs"), esm);
    await installWithPeer(project4, tarball, join(root, "node_modules", "redis"));
    assert.equal(readJson(join(project4, "node_modules", "redis", "package.json")).version.split(".")[0], "4");
    const r = ok(await run(process.execPath, ["check.mjs", srv.url, "node-esm-v4"], project4, 60_000), "Node ESM, v4");
    assert.match(r.stdout, /^redlease ok node-esm-v4: released=true,true timedOut=true fenced=true$/m);
  });
});
