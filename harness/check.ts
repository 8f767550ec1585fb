// Self-check for harness/topology.ts and the modules behind it in harness/ (not a test file):
//
//   node --import tsx harness/check.ts
//   npx bun harness/check.ts
//   npx deno run -A harness/check.ts
//
// Exits non-zero on the first failed check.
import { existsSync } from "node:fs";
import process from "node:process";
import { runtimeName } from "./process.ts";
import { command, pause, resume, slotOf, startCluster, startMasters, startSentinel } from "./topology.ts";

const t0 = performance.now();
const ms = (from: number) => `${Math.round(performance.now() - from)} ms`;
const log = (msg: string) => console.log(`[${((performance.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);

function check(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(`CHECK FAILED: ${msg}`);
}

function isDead(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

/**
 * Retry fn until one attempt succeeds; returns the time it took. An attempt that neither succeeds nor fails within
 * 2 s is left running (it may still succeed, and counts if it does) while a new attempt starts.
 */
function retryUntilOk(what: string, timeoutMs: number, fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  return new Promise<number>((resolve, reject) => {
    let done = false;
    let last: unknown;
    const attempt = () => {
      if (done) return;
      if (performance.now() - start > timeoutMs) {
        done = true;
        return reject(new Error(`${what}: still failing after ${timeoutMs} ms: ${String(last)}`));
      }
      let settled = false;
      const stuck = setTimeout(() => !settled && attempt(), 2000);
      fn().then(
        () => {
          settled = true;
          clearTimeout(stuck);
          if (!done) {
            done = true;
            resolve(performance.now() - start);
          }
        },
        (e) => {
          settled = true;
          clearTimeout(stuck);
          last = e;
          setTimeout(attempt, 50);
        },
      );
    };
    attempt();
  });
}

async function checkCluster() {
  let t = performance.now();
  const c = await startCluster();
  log(`cluster up in ${ms(t)}: ${c.nodes.map((n) => `${n.port}/${n.role}`).join(" ")}`);
  try {
    check(c.nodes.length === 6, "6 nodes");
    check(c.masters().length === 3 && c.replicas().length === 3, "3 masters + 3 replicas");
    check(c.nodes.every((n) => /^[0-9a-f]{40}$/.test(n.id)), "node ids");

    // slotOf vs CLUSTER KEYSLOT: the one CRC16 (src/adapters/_slot.ts), which the ioredis adapter ships
    const keys = [
      "",
      "a",
      "foo",
      "bar",
      "hello world",
      "123456789",
      "{user1000}.following",
      "{user1000}.followers",
      "foo{}{bar}",
      "foo{{bar}}zap",
      "foo{bar}{zap}",
      "{}",
      "{",
      "}",
      "{}{x}",
      "x{}y",
      "{a",
      "a}",
      "}{a}",
      "{{}}",
      "über",
      "ключ",
      "键{标签}",
      "emoji🙂",
      "lease:{orders}:42",
      "lease:{orders}:43",
      "{tagged}",
      "{tagged}:x",
      "pre{tagged}post",
      "{tagged}{other}",
    ];
    for (let i = 0; keys.length < 50; i++) {
      keys.push(i % 2 ? `key:${i}:${Math.random().toString(36).slice(2)}` : `{t${i}}.k`);
    }
    const probe = await c.nodeClient(c.masters()[0]!.port);
    for (const k of keys) {
      const server = await probe.sendCommand(["CLUSTER", "KEYSLOT", k]);
      check(server === slotOf(k), `slotOf(${JSON.stringify(k)}) = ${slotOf(k)}, CLUSTER KEYSLOT = ${String(server)}`);
    }
    check(slotOf("123456789") === 12739, "crc16 reference vector 123456789 -> 0x31C3 -> slot 12739");
    check(slotOf("{user1000}.following") === slotOf("{user1000}.followers"), "hash tags");
    log(`slotOf agrees with CLUSTER KEYSLOT for ${keys.length} keys`);

    // cluster client
    const cluster = await c.cluster();
    for (let i = 0; i < 30; i++) await cluster.set(`k:${i}`, `v${i}`);
    for (let i = 0; i < 30; i++) check((await cluster.get(`k:${i}`)) === `v${i}`, `get k:${i}`);
    const owners = new Set(Array.from({ length: 30 }, (_, i) => c.ownerOf(slotOf(`k:${i}`)).port));
    check(owners.size === 3, "30 keys spread over all 3 masters");
    log("cluster client set/get 30 keys across 3 masters");

    // live slot migration with a write in the ASK window
    const key = "migrate:{probe}";
    await cluster.set(key, "before");
    const slot = slotOf(key);
    const from = c.ownerOf(slot);
    const to = c.masters().find((m) => m.port !== from.port)!;
    const direct = await c.nodeClient(to.port);
    t = performance.now();
    const res = await c.migrateSlot(slot, to.port, {
      pauseMs: 200,
      async during() {
        // In the ASK window: the key still lives on the source, a new key of the slot goes to the target (ASK).
        check((await cluster.get(key)) === "before", "read during migration");
        await cluster.set("new:{probe}", "asked");
        // The new key went to the target through ASK; the old one is still on the source.
        check((await command(to.port, ["CLUSTER", "COUNTKEYSINSLOT", slot])) === 1, "ASK write landed on the target");
        check((await command(from.port, ["CLUSTER", "COUNTKEYSINSLOT", slot])) === 1, "source still holds its key");
      },
    });
    log(`migrated slot ${slot} ${res.from} -> ${res.to} (${res.keys} keys moved) in ${ms(t)}`);
    check(res.from === from.port && res.to === to.port && res.keys >= 1, "migration result");
    check(c.ownerOf(slot).port === to.port, "ownerOf after migration");
    check((await cluster.get(key)) === "before", "key readable through the cluster client after migration");
    check((await cluster.get("new:{probe}")) === "asked", "key written in the ASK window readable after migration");
    check((await direct.get(key)) === "before", "key lives on the target node");
    await cluster.set(key, "after");
    check((await direct.get(key)) === "after", "write after migration lands on the target");
    for (const n of c.nodes) {
      const s = (await command(n.port, ["CLUSTER", "SLOTS"])) as unknown as Array<[number, number, [string, number]]>;
      const r = s.find(([a, b]) => a <= slot && slot <= b)!;
      check(r[2][1] === to.port, `node ${n.port} agrees slot ${slot} is on ${to.port}`);
    }
    log("key readable and writable through the cluster client after migration; all nodes agree");

    // pause/resume smoke
    const victim = c.replicas()[0]!;
    pause(victim.pid);
    check(await command(victim.port, ["PING"], { timeoutMs: 300 }).then(() => false, () => true), "paused node silent");
    resume(victim.pid);
    check((await command(victim.port, ["PING"])) === "PONG", "resumed node answers");
    log("pause/resume ok");
  } finally {
    const pids = c.nodes.map((n) => n.pid);
    t = performance.now();
    await c.stop();
    check(pids.every(isDead), "all cluster pids dead after stop()");
    check(!existsSync(c.dir), "cluster temp dir removed");
    log(`cluster stopped in ${ms(t)}`);
  }
}

async function checkSentinel() {
  let t = performance.now();
  const s = await startSentinel();
  log(
    `sentinel setup up in ${ms(t)}: master ${s.master.port}, replicas ${s.replicas.map((r) => r.port)}, ` +
      `sentinels ${s.sentinels.map((x) => x.port)}`,
  );
  try {
    check((await s.currentMaster()).port === s.master.port, "currentMaster() is the initial master");
    const v5 = await s.sentinelClient();
    const io = await s.ioredisClient();
    await v5.set("before", "v5");
    await io.set("before-io", "io");
    check(
      (await io.get("before")) === "v5" && (await v5.get("before-io")) === "io",
      "both clients see each other's writes",
    );
    const m = await s.nodeClient(s.master.port);
    await m.sendCommand(["WAIT", "1", "2000"]); // make sure the replica has both keys before we kill the master
    log("v5 sentinel client and ioredis client connected, wrote keys");

    const killedAt = await s.killMaster();
    const oldPort = s.master.port;
    check(!s.master.alive, "master process dead");
    // Clients keep retrying writes from the moment of the kill; all times are measured from the kill.
    const sinceKill = (p: Promise<number>) => p.then(() => performance.now() - killedAt);
    const v5Back = sinceKill(retryUntilOk("v5 sentinel client write", 40_000, () => v5.set("after", "v5")));
    const ioBack = sinceKill(retryUntilOk("ioredis write", 40_000, () => io.set("after-io", "io")));
    const newPort = await s.waitForFailover(oldPort, 40_000);
    const failoverMs = performance.now() - killedAt;
    log(
      `FAILOVER: ${oldPort} -> ${newPort} in ${Math.round(failoverMs)} ms (kill -> a sentinel names a new master ` +
        `that reports role:master; down-after 1000 ms)`,
    );
    check(newPort === s.replicas[0]!.port, "replica promoted");
    const [v5Ms, ioMs] = await Promise.all([v5Back, ioBack]);
    log(
      `first successful write after the kill: v5 sentinel client ${Math.round(v5Ms)} ms, ioredis ${
        Math.round(ioMs)
      } ms`,
    );
    // waitForFailover() returns as soon as one sentinel names the new master; the others follow via hello messages.
    await retryUntilOk("all sentinels to name the new master", 10_000, async () => {
      for (const x of s.sentinels) {
        const [, port] = (await command(x.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.masterName])) as string[];
        if (Number(port) !== newPort) throw new Error(`sentinel ${x.port} names ${port}`);
      }
    });
    check((await s.currentMaster()).port === newPort, "currentMaster() follows");
    await v5.set("after2", "v5");
    await io.set("after2-io", "io");
    check((await v5.get("before")) === "v5" && (await io.get("before-io")) === "io", "pre-failover data survived");
    const direct = await s.nodeClient(newPort);
    check(
      (await direct.get("after")) === "v5" && (await direct.get("after-io")) === "io",
      "writes landed on the new master",
    );
    log("both clients write to the new master; pre-failover keys present");
  } finally {
    const pids = [s.master, ...s.replicas, ...s.sentinels].map((p) => p.pid);
    t = performance.now();
    await s.stop();
    check(pids.every(isDead), "all sentinel-setup pids dead after stop()");
    check(!existsSync(s.dir), "sentinel temp dir removed");
    log(`sentinel setup stopped in ${ms(t)}`);
  }
}

async function checkMasters() {
  const ms3 = await startMasters(3);
  try {
    check(new Set(ms3.map((m) => m.port)).size === 3, "3 distinct ports");
    for (const m of ms3) check((await command(m.port, ["PING"])) === "PONG", `master ${m.port} answers`);
    log(`startMasters(3): ${ms3.map((m) => m.port).join(" ")}`);
  } finally {
    const pids = ms3.map((m) => m.pid);
    await ms3.stopAll();
    check(pids.every(isDead), "startMasters pids dead after stopAll()");
  }
}

log(`runtime: ${runtimeName()}`);
try {
  await checkCluster();
  await checkSentinel();
  await checkMasters();
  log(`ALL CHECKS PASSED in ${ms(t0)}`);
  process.exit(0);
} catch (e) {
  console.error(e);
  process.exit(1);
}
