// Argument parsing for the CLI: long options (`--x v`, `--x=v`), flags, `-h`, `--`, and durations.
import { usage } from "./_common.ts";

export type OptionKind = "value" | "flag";
export type OptionSpec = Readonly<Record<string, OptionKind>>;

/** Options every command accepts. */
export const GLOBAL_OPTIONS: OptionSpec = { url: "value", prefix: "value", help: "flag" };

export interface Parsed {
  readonly options: ReadonlyMap<string, string | true>;
  readonly positionals: readonly string[];
  /** `run`: the command line, everything from the first word after the leading positionals (or after `--`). */
  readonly command: readonly string[];
}

/**
 * Parse `argv` for `command`. With `commandAfter = n`, the first non-option word after `n` positionals (or
 * everything after `--`) starts a command line that is passed through untouched, like `env` or `timeout` do.
 */
export function parseArgs(command: string, argv: readonly string[], spec: OptionSpec, commandAfter?: number): Parsed {
  const options = new Map<string, string | true>();
  const positionals: string[] = [];
  let rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      rest = argv.slice(i + 1);
      break;
    }
    if (arg === "-h") {
      options.set("help", true);
      continue;
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const key = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
      const kind = spec[key];
      if (kind === undefined) throw usage(command, `unknown option '--${key}'`);
      if (kind === "flag") {
        if (eq >= 0) throw usage(command, `option '--${key}' takes no value`);
        options.set(key, true);
      } else if (eq >= 0) {
        options.set(key, arg.slice(eq + 1));
      } else {
        if (i + 1 >= argv.length) throw usage(command, `option '--${key}' needs a value`);
        options.set(key, argv[++i]);
      }
      continue;
    }
    if (arg.length > 1 && arg.startsWith("-")) throw usage(command, `unknown option '${arg}'`);
    if (commandAfter !== undefined && positionals.length >= commandAfter) {
      rest = argv.slice(i);
      break;
    }
    positionals.push(arg);
  }
  if (commandAfter === undefined) {
    positionals.push(...rest);
    rest = [];
  }
  return { options, positionals, command: rest };
}

/** Value of a value option, or undefined. */
export function value(p: Parsed, key: string): string | undefined {
  const v = p.options.get(key);
  return typeof v === "string" ? v : undefined;
}

export function flag(p: Parsed, key: string): boolean {
  return p.options.get(key) === true;
}

/** The largest delay a timer (and the library) accepts. */
export const MAX_MS = 2_147_483_647;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

export interface DurationLimits {
  /** Smallest accepted value in ms. */
  readonly min: number;
  /** Whether `inf`, `infinity` and `forever` are accepted (as Infinity). */
  readonly infinite?: boolean;
}

/**
 * Parse a duration: a number with a unit (`500ms`, `30s`, `1.5s`, `2m`, `1h`), several of them combined
 * (`1m30s`), or a bare `0`. A bare number other than 0 is refused: `--lease 30` could mean seconds or ms.
 * Returns whole milliseconds.
 */
export function parseDuration(command: string, option: string, text: string, limits: DurationLimits): number {
  const t = text.trim().toLowerCase();
  const bad = (why: string) => usage(command, `bad --${option} '${text}': ${why}`);
  if (limits.infinite && /^(inf|infinity|forever)$/.test(t)) return Infinity;
  let ms = 0;
  if (t.length === 0) throw bad("expected a duration, such as 500ms, 30s, 2m, 1h or 1m30s");
  if (t !== "0") {
    const part = /(\d+(?:\.\d+)?|\.\d+)(ms|h|m|s)/y;
    let at = 0;
    while (at < t.length) {
      part.lastIndex = at;
      const m = part.exec(t);
      if (!m) {
        const hint = /^\d+(\.\d+)?$/.test(t) ? "a unit is required" : "expected a duration";
        throw bad(`${hint}, such as 500ms, 30s, 2m, 1h or 1m30s`);
      }
      ms += Number(m[1]) * UNIT_MS[m[2]];
      at = part.lastIndex;
    }
  }
  ms = Math.round(ms);
  if (ms < limits.min) throw bad(`must be at least ${formatMs(limits.min)}`);
  if (ms > MAX_MS) throw bad(`must be at most ${MAX_MS}ms (about 24.8 days)${limits.infinite ? " or 'inf'" : ""}`);
  return ms;
}

/** A short human duration for messages and tables: 850ms, 12.3s, 2m05s, 1h02m. */
export function formatMs(ms: number): string {
  if (ms === Infinity) return "forever";
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) {
    const s = ms / 1_000;
    return `${Number.isInteger(s) ? s : s.toFixed(1)}s`;
  }
  if (ms < 3_600_000) {
    const m = Math.floor(ms / 60_000);
    const s = Math.floor((ms % 60_000) / 1_000);
    return s === 0 ? `${m}m` : `${m}m${String(s).padStart(2, "0")}s`;
  }
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  return m === 0 ? `${h}h` : `${h}h${String(m).padStart(2, "0")}m`;
}
