// Harness: bookkeeping of what the server starters (harness/redis.ts) leave behind: the redis-server
// processes still running, the temp dirs not yet removed and the loopback ports handed out. A process 'exit' hook
// SIGKILLs the processes still running (each by its own pid) and removes the dirs, so a crashed test or an
// interrupted benchmark leaves no orphan behind. Nothing here ever hands out (or signals anything on) port 6379.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";

/** What the exit hook needs to know about a process. */
export interface Tracked {
  readonly pid: number;
  readonly exited: boolean;
}

const live = new Set<Tracked>();
const dirs = new Set<string>();
const ports = new Set<number>();
let hookInstalled = false;

function installExitHook(): void {
  if (hookInstalled) return;
  hookInstalled = true;
  process.on("exit", () => {
    for (const p of live) if (!p.exited) tryKill(p.pid, "SIGKILL");
    for (const d of dirs) {
      try {
        rmSync(d, { recursive: true, force: true });
      } catch { /* best effort */ }
    }
  });
}

/** Kill this process when the test process exits, unless it has exited by then. */
export function track(p: Tracked): void {
  installExitHook();
  live.add(p);
}

export function untrack(p: Tracked): void {
  live.delete(p);
}

/** Send a signal by pid; false if there is no such process (any more). */
export function tryKill(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** A new temp dir `redlease-<label>-XXXXXX`, removed by removeDir() or at exit. */
export function tempDir(label: string): string {
  installExitHook();
  const dir = mkdtempSync(join(tmpdir(), `redlease-${label}-`));
  dirs.add(dir);
  return dir;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  dirs.delete(dir);
}

/** A loopback port that was free a moment ago (the OS picks it: port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Where every test process on this machine notes the ports it handed out (an empty file per port, its mtime the time):
 * a port noted less than PORT_QUIET_MS ago is not handed out again, by this process or another. A sentinel remembers
 * the address of every instance it has seen (a killed master too) and keeps reconnecting to it; a server of another
 * setup started on that port would be reconfigured by it. The `ports` set covers this module only (Deno runs each
 * test file in an isolate of its own), these notes every module and process.
 */
const PORT_NOTES = join(tmpdir(), "redlease-test-ports");
const PORT_QUIET_MS = 15 * 60_000;

let pruned = false;

/** Remove the notes older than PORT_QUIET_MS (once per module instance), so that they do not pile up in $TMPDIR. */
function pruneNotes(): void {
  pruned = true;
  try {
    const now = Date.now();
    for (const f of readdirSync(PORT_NOTES)) {
      const file = join(PORT_NOTES, f);
      try {
        if (now - statSync(file).mtimeMs >= PORT_QUIET_MS) rmSync(file, { force: true });
      } catch { /* noted or removed by another process meanwhile */ }
    }
  } catch { /* no notes yet */ }
}

/** Note `port` as handed out now; false if it was handed out (by anyone) within PORT_QUIET_MS. */
function notePort(port: number): boolean {
  if (!pruned) pruneNotes();
  const file = join(PORT_NOTES, String(port));
  try {
    if (Date.now() - statSync(file).mtimeMs < PORT_QUIET_MS) return false;
  } catch { /* not noted yet */ }
  try {
    mkdirSync(PORT_NOTES, { recursive: true });
    writeFileSync(file, "");
  } catch { /* best effort: the OS's pick and the `ports` set still apply */ }
  return true;
}

/**
 * A free loopback port, never 6379, not handed out by this module to a server not yet released, nor by any test
 * process on this machine in the last PORT_QUIET_MS.
 */
export async function reservePort(): Promise<number> {
  for (let i = 0;; i++) {
    const p = await freePort();
    if (p !== 6379 && !ports.has(p) && notePort(p)) {
      ports.add(p);
      return p;
    }
    if (i > 200) throw new Error("could not find a free port");
  }
}

export function releasePort(port: number | undefined): void {
  if (port !== undefined) ports.delete(port);
}
