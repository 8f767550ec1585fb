/**
 * The app that the code blocks of README.md and docs/ stand in for: the functions and values a block calls without
 * defining them (`chargeCustomer`, `ledger`, …), declared as globals for the type-check by `scripts/check_readme.ts`, and defined
 * on `globalThis` (before the block runs, by `--import`) for the blocks that it runs. One signature per name, so
 * every block must call it the same way. Not part of the library; `tsconfig.test.json` leaves this folder out so
 * that these globals are not seen by the tests.
 */

/** How a block passes its lease to a write: the fencing token, and the signal that aborts when the lease is lost. */
interface Fenced {
  readonly fence: number;
  readonly signal: AbortSignal;
}

declare global {
  /** Charges a customer, fenced by the lease that guards the invoice. */
  function chargeCustomer(options: Fenced): Promise<void>;
  /** The nightly clean-up job. */
  function cleanup(options: Fenced): Promise<void>;
  /** An export job run by a worker. */
  function runExport(id: string, options: Fenced): Promise<void>;
  /** The scheduler a leader runs, fenced by its term. */
  function runScheduler(options: { readonly term: number; readonly signal: AbortSignal }): Promise<void>;
  /** A transfer between two accounts, fenced by the lease of each. */
  function transfer(
    options: {
      readonly from: number;
      readonly to: number;
      readonly fences: readonly number[];
      readonly signal: AbortSignal;
    },
  ): Promise<void>;
  /** Account balances. */
  const ledger: {
    read(account: number, options: { readonly signal: AbortSignal }): Promise<number>;
    write(account: number, balance: number, options: Fenced): Promise<void>;
  };
  /** A job queue. */
  const jobs: { push(job: { readonly id: string; readonly token: string }): Promise<void> };
  /** The app's structured logger (pino-style: fields first, then the message). */
  const log: {
    info(fields: Record<string, unknown>, message: string): void;
    warn(fields: Record<string, unknown>, message: string): void;
    debug(fields: Record<string, unknown>, message: string): void;
  };
}

const balances = new Map<number, number>();
const fenced = (signal: AbortSignal) => {
  signal.throwIfAborted();
  return Promise.resolve();
};

Object.assign(globalThis, {
  chargeCustomer: ({ signal }: Fenced) => fenced(signal),
  cleanup: ({ signal }: Fenced) => fenced(signal),
  runExport: (_id: string, { signal }: Fenced) => fenced(signal),
  runScheduler: ({ signal }: { signal: AbortSignal }) => fenced(signal),
  transfer: ({ signal }: { signal: AbortSignal }) => fenced(signal),
  ledger: {
    read: (account: number, { signal }: { signal: AbortSignal }) =>
      fenced(signal).then(() => balances.get(account) ?? 0),
    write: (account: number, balance: number, { signal }: Fenced) =>
      fenced(signal).then(() => void balances.set(account, balance)),
  },
  jobs: { push: () => Promise.resolve() },
  log: { info: () => {}, warn: () => {}, debug: () => {} },
});
export {};
