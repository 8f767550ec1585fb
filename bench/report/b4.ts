// Report section B4: Redis commands and CPU per acquisition, told apart into client and Lua-internal.
import { describeCounts } from "../_stats.ts";
import type { B3Agg, Label, UncAgg } from "./aggregate.ts";
import { fmt, table } from "./format.ts";

/** B4 Redis work per acquisition in B1, B2 and B3 (none without them). */
export function b4Section(uncAgg: UncAgg[], b3: B3Agg[], label: Label): string[] {
  const md: string[] = [];
  if (uncAgg.length || b3.length) {
    md.push(`## B4 Redis work per acquisition`);
    md.push("");
    md.push(
      `From \`INFO commandstats\` and \`INFO cpu\` deltas around each measured window (\`CONFIG RESETSTAT\` on a ` +
        `separate admin connection, whose INFO/CONFIG calls are excluded). Redis 7.0 commandstats counts a command ` +
        `whether a client sent it or a Lua script called it, so they are told apart by library: the commands each ` +
        `library sends itself are known from its source (redlease: EVALSHA, EVAL after NOSCRIPT, SUBSCRIBE/UNSUBSCRIBE; raw: ` +
        `SET, EVALSHA, SCRIPT LOAD; redlock and @sesamecare-oss/redlock: EVALSHA, EVAL after NOSCRIPT; ` +
        `redis-semaphore: SET, EVALSHA, EVAL), and none of them is ever called by that library's scripts, so ` +
        `client = the sum of those and Lua-internal = total − client. The split is cross-checked in B1 against the ` +
        `commands parsed from the bytes each client writes to its socket ("wire"). Per acquisition = over every ` +
        `acquisition of the window including the tail. Redis CPU = used_cpu_user + used_cpu_sys of redis-server; ` +
        `client CPU = process.cpuUsage() of the benchmark process(es); client wake-ups (B3) = voluntary context ` +
        `switches of the worker processes (process.resourceUsage()): each is a process woken from a wait by a reply, ` +
        `a message or a timer.`,
    );
    md.push("");
    const rows: string[][] = [];
    for (const u of uncAgg) {
      const wire = Object.entries(u.wire).map(([k, v]) => `${k} ${v}`).join(", ");
      rows.push([
        label(u.lib),
        "B1 (W=1)",
        fmt(u.b1c.clientPerOp),
        fmt(u.b1c.totalPerOp),
        fmt(u.b1c.luaPerOp),
        fmt(u.b1redis, 1),
        fmt(u.b1client, 1),
        "",
        `${describeCounts(u.b1c)}; wire: ${wire}`,
      ]);
      rows.push([
        label(u.lib),
        "B2 (64 loops)",
        fmt(u.b2c.clientPerOp),
        fmt(u.b2c.totalPerOp),
        fmt(u.b2c.luaPerOp),
        fmt(u.b2redis, 1),
        fmt(u.b2client, 1),
        "",
        "",
      ]);
    }
    for (const a of b3) {
      rows.push([
        a.variant.label,
        `B3 W=${a.W}`,
        fmt(a.commands.clientPerOp),
        fmt(a.commands.totalPerOp),
        fmt(a.commands.luaPerOp),
        fmt(a.redisCpuUs, 1),
        fmt(a.clientCpuUs, 1),
        fmt(a.clientWakeups),
        describeCounts(a.commands),
      ]);
    }
    md.push(table(
      [
        "library",
        "phase",
        "client cmds",
        "total incl. Lua",
        "Lua-internal",
        "Redis CPU µs",
        "client CPU µs",
        "client wake-ups",
        "per-command calls / acquisition",
      ],
      rows,
    ));
    md.push("");
  }
  return md;
}
