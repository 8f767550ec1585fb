// The end of a lease handle, one implementation for a lease on one name (LeaseImpl) and on several (LeaseGroup):
// the first end wins, and the signal that tells of it is made only when someone asks for it.

/** The abort reason of a released lease: one shared instance, since a DOMException is costly to create. */
let released: DOMException | undefined;

/**
 * What every lease handle has: a `signal` that aborts at its end with the first reason given, and its release once
 * started. A base class rather than a composed object, so that a handle is one allocation; and the AbortController
 * is made on first use of `signal`, since most leases are released with nobody listening.
 */
export abstract class Ending {
  #controller: AbortController | undefined;
  #ended: unknown;
  #releasing: Promise<boolean> | undefined;

  /** Aborts at the end, with its reason; made already aborted when asked for after the end. */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#ended !== undefined) this.#controller.abort(this.#ended);
    }
    return this.#controller.signal;
  }

  /** Whether the handle has ended, and why (undefined while live). */
  get endedWith(): unknown {
    return this.#ended;
  }

  /** The release of this handle, once started (every later release returns it). */
  get releasing(): Promise<boolean> | undefined {
    return this.#releasing;
  }

  /** End this handle: abort its signal with `reason` (first call wins). */
  end(reason: unknown): void {
    if (this.#ended !== undefined) return;
    this.#ended = reason;
    this.#controller?.abort(reason);
  }

  /** Take `sent` as this handle's release, and end it as released; returns `sent`. */
  protected releasedBy(sent: Promise<boolean>): Promise<boolean> {
    // Set before the signal aborts: a listener that releases this handle too must find it released.
    this.#releasing = sent;
    this.end(released ??= new DOMException("Lease released", "AbortError"));
    return sent;
  }
}
