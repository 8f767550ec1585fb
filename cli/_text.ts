// Text for the terminal: what the CLI prints of strings read from Redis (owners, labels, names, values), and how
// wide a line is on screen.

/**
 * Characters that must not reach a terminal as they are: controls (newline, escape: a line break, or an escape
 * sequence that drives the terminal), format characters (bidirectional overrides, zero-width characters), the line
 * and paragraph separators, and lone surrogates.
 */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

const SHORT: Record<string, string> = { "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r" };

/**
 * `text` as one line of printable characters: every control or format character, line or paragraph separator
 * is shown as a JSON-style escape (`\n`, `\u001b`, `\u202e`; astral ones as their two UTF-16 escapes). Everything
 * else, backslashes included, is kept as it is. For text read from Redis, which any client may have written; the
 * exact strings are in the commands' --json output.
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => SHORT[c] ?? unicodeEscapes(c));
}

/** `\uXXXX` for every UTF-16 code unit of `c`. */
function unicodeEscapes(c: string): string {
  let out = "";
  for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`;
  return out;
}

/** Emoji shown as emoji by default (two columns on a terminal). */
const EMOJI = /\p{Emoji_Presentation}/u;

/**
 * Columns a code point takes on a terminal: 2 in the East Asian Wide and Fullwidth blocks (Hangul Jamo, CJK,
 * Hiragana, Katakana, Hangul, fullwidth forms) and for emoji, else 1. An approximation that errs on the wide side
 * (combining marks count 1): a line measured with it may end short of the edge, but does not wrap.
 */
export function charWidth(c: string): number {
  const cp = c.codePointAt(0)!;
  if (cp < 0x1100) return 1;
  if (
    cp <= 0x115f || // Hangul Jamo initials
    (cp >= 0x2e80 && cp <= 0x303e) || // CJK radicals, Kangxi, ideographic description, CJK symbols and punctuation
    (cp >= 0x3041 && cp <= 0x33ff) || // Hiragana, Katakana, Bopomofo, Hangul compatibility Jamo, CJK compatibility
    (cp >= 0x3400 && cp <= 0x4dbf) || // CJK extension A
    (cp >= 0x4e00 && cp <= 0xa4cf) || // CJK unified ideographs, Yi
    (cp >= 0xa960 && cp <= 0xa97f) || // Hangul Jamo extended A
    (cp >= 0xac00 && cp <= 0xd7a3) || // Hangul syllables
    (cp >= 0xf900 && cp <= 0xfaff) || // CJK compatibility ideographs
    (cp >= 0xfe10 && cp <= 0xfe19) || // vertical forms
    (cp >= 0xfe30 && cp <= 0xfe6f) || // CJK compatibility forms, small form variants
    (cp >= 0xff00 && cp <= 0xff60) || // fullwidth forms
    (cp >= 0xffe0 && cp <= 0xffe6) || // fullwidth signs
    (cp >= 0x16fe0 && cp <= 0x18cff) || // Tangut, Khitan
    (cp >= 0x1b000 && cp <= 0x1b2ff) || // Kana supplement and extensions, Nushu
    (cp >= 0x1f300 && cp <= 0x1f64f) || // pictographs, emoticons
    (cp >= 0x1f900 && cp <= 0x1f9ff) || // supplemental symbols and pictographs
    (cp >= 0x1fa70 && cp <= 0x1faff) || // symbols and pictographs extended A
    (cp >= 0x20000 && cp <= 0x3fffd) // CJK extensions B and later (planes 2 and 3)
  ) return 2;
  return EMOJI.test(c) ? 2 : 1;
}

/** Columns `text` takes on a terminal (see charWidth). */
export function displayWidth(text: string): number {
  let w = 0;
  for (const c of text) w += charWidth(c);
  return w;
}

/** `text` cut to at most `columns` terminal columns, whole characters, ending in "…" when cut. */
export function cutToColumns(text: string, columns: number): string {
  if (displayWidth(text) <= columns) return text;
  let out = "";
  let w = 0;
  for (const c of text) {
    const cw = charWidth(c);
    if (w + cw > columns - 1) break; // room for the "…"
    out += c;
    w += cw;
  }
  return out + "…";
}

/** `text` cut to at most `units` UTF-16 code units (what String#length counts), whole code points, "…" when cut. */
export function cutToUnits(text: string, units: number): string {
  if (text.length <= units) return text;
  let out = "";
  for (const c of text) {
    if (out.length + c.length > units - 1) break;
    out += c;
  }
  return out + "…";
}

/** `text` cut to at most `max` code points, ending in "…" when cut. */
export function cutToCodePoints(text: string, max: number): string {
  const chars = [...text];
  return chars.length <= max ? text : chars.slice(0, max - 1).join("") + "…";
}
