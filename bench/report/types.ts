// The shape of a benchmark results file (bench/results/<out>.json): what bench/run.ts measures and the report renders.
import type { LibId } from "../_libs.ts";
import type { CommandCounts } from "../_stats.ts";

export interface Variant {
  id: string;
  lib: LibId;
  tuned: boolean;
  label: string;
  settings: string;
}

interface Unc {
  cycles: number;
  cyclesPerSec: number;
  p50Ms: number;
  p99Ms: number;
  commands: CommandCounts;
  redisCpuUs: number;
  clientCpuUs: number;
  /** CPU the rest of the machine used in the window, % of one core (absent in results from before it was measured). */
  othersCpuPct?: number;
}

export interface UncRep {
  lib: LibId;
  rep: number;
  loadAvg: number[];
  b1: Unc & { roundTrips: number; wireCommands: Record<string, number> };
  b2: Unc;
}

export interface B3Rep {
  /** B7: acquisitions per heavy worker over those per light worker, within the window (1: as many turns each). */
  heavyPerLight?: number;
  variant: string;
  lib: LibId;
  W: number;
  rep: number;
  loadAvg: number[];
  acquisitions: number;
  acquisitionsTotal: number;
  acqPerSec: number;
  gapP50Ms: number;
  gapP99Ms: number;
  gapMaxMs: number;
  gapSplitP50Ms: { releaseToWrite: number; writeToRead: number; readToAcquired: number };
  crossWorkerHandoffs: number;
  sameWorkerShare: number;
  minPerWorker: number;
  maxPerWorker: number;
  fairness: number;
  failures: number;
  warmFailures: number;
  firstError?: string;
  waitP50Ms: number;
  waitP99Ms: number;
  waitMaxMs: number;
  holdP50Ms: number;
  overlaps: number;
  commands: CommandCounts;
  redisCpuUs: number;
  clientCpuUs: number;
  /** Voluntary context switches of the workers per acquisition (absent in results from before it was counted). */
  clientWakeups?: number;
  maxClockOffsetMs: number;
}

export interface ColdRep {
  which: string;
  lib: LibId;
  rep: number;
  bootMs: number;
  importClientMs: number;
  importMs: number;
  connectMs: number;
  acquireMs: number;
  releaseMs: number;
  toFirstLeaseMs: number;
  connectsToLease: number;
  roundTripsToLease: number;
  commandsToLease: Record<string, number>;
  /** Of those, the round trips of the first acquire alone (from the client being connected to the lease). */
  roundTripsAcquire?: number;
  roundTripsWithRelease: number;
  commandsWithRelease: Record<string, number>;
}

export interface Size {
  name: string;
  minBytes: number;
  gzipBytes: number;
  note: string;
  inputs: { file: string; bytes: number }[];
}

export interface Run {
  date: string;
  command: string;
  env: {
    node: string;
    redis: string;
    cpus: number;
    cpu: string;
    git: { head: string; dirtyCore: string[] };
    loadAvg: Record<string, number[]>;
  };
  config: Record<string, unknown>;
  variants: Variant[];
  unc: UncRep[];
  b3: B3Rep[];
  /** B6: permits (absent in results from before it was measured). */
  b6?: B3Rep[];
  /** B7: weighted permits (absent in results from before it was measured). */
  b7?: B3Rep[];
  cold: ColdRep[];
  sizes: Size[];
  errors: string[];
  durationS: number;
  phaseS: Record<string, number>;
  summary?: unknown;
}
