// A lease over several names: one handle on one hold per name (each with its own fence, renewal and deadline),
// released, extended and lost together. Its signal aborts when any of its holds is lost.
import { type LeaseImpl, releaseHandle } from "./_hold.ts";
import type { Lease, LeaseKind } from "./lease.ts";
import { Ending } from "./_ending.ts";

/** A lease over several names: what acquire() returns for them. Its signal and release are those of every handle. */
export class LeaseGroup extends Ending implements Lease {
  /** The handle on each name, in the caller's order of names. */
  readonly parts: readonly LeaseImpl[];
  readonly name: string;

  /** `parts` in the caller's order of names; every part is live and has the same owner. */
  constructor(parts: readonly LeaseImpl[]) {
    super();
    this.parts = parts;
    this.name = parts.map((p) => p.name).join(", ");
    const onLost = (p: LeaseImpl) => () => this.end(p.signal.reason);
    for (const p of parts) {
      // A part that ended already never fires: the group is then ended from the start.
      if (p.endedWith !== undefined) this.end(p.endedWith);
      else p.signal.addEventListener("abort", onLost(p), { once: true });
    }
  }

  get names(): readonly string[] {
    return this.parts.map((p) => p.name);
  }
  get fences(): readonly number[] {
    return this.parts.map((p) => p.fence);
  }
  /** The first name's fence (each name has its own: see `fences`). */
  get fence(): number {
    return this.parts[0].fence;
  }
  get owner(): string {
    return this.parts[0].owner;
  }
  get kind(): LeaseKind {
    return this.parts[0].kind;
  }
  get expiresAt(): number {
    return Math.min(...this.parts.map((p) => p.expiresAt));
  }
  get remainingMs(): number {
    return Math.max(0, this.expiresAt - performance.now());
  }
  get token(): string {
    throw new TypeError(
      `Cannot make a token for lease '${this.name}': a lease over several names cannot be resumed elsewhere`,
    );
  }

  /** Release every part (idempotent): true when every one was still held. */
  release(timeoutMs?: number): Promise<boolean> {
    return this.releasing ??
      this.releasedBy(Promise.all(this.parts.map((p) => releaseHandle(p, timeoutMs))).then((r) => r.every(Boolean)));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
