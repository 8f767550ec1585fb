// docs/how-it-works.md's "Keys" table and script list, checked against the code so that they cannot drift (README's
// keys table had: a queue entry without its lock delay, the grant record's delay under another name, no election
// keys):
// - the keys and channels the table names are exactly those src/_protocol.ts builds (`${hash}:q`, …) plus those the
//   scripts build themselves (`KEYS[1] .. ':o'`);
// - every record or message format the table quotes (a backticked `<…>` text of its contents column) is found,
//   verbatim, in the comment of the Lua file its last column names, where the scripts define it;
// - every file of lua/ is named on the page, and every `*.lua` the page names exists.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const read = (file: string) => readFileSync(join(root, file), "utf8");
const page = read("docs/how-it-works.md");

interface Row {
  /** The key's suffix after `<prefix>:{<name>}`: "", ":q", ":w:" (a channel per client), … */
  readonly suffix: string;
  /** The formats its contents quote, `\|` read as `|`. */
  readonly formats: string[];
  /** The Lua file that defines them. */
  readonly source: string;
}

/** The rows of the table under "## Keys", cells split on unescaped pipes. */
function rows(): Row[] {
  const lines = page.split("\n");
  const at = lines.indexOf("## Keys");
  assert.ok(at >= 0, "docs/how-it-works.md has no '## Keys' section");
  const table: string[] = [];
  for (const line of lines.slice(at + 1)) {
    if (line.startsWith("## ")) break;
    if (line.startsWith("|")) table.push(line);
    else if (table.length > 0) break;
  }
  return table.slice(2).map((line) => {
    const cells = line.slice(1, -1).split(/(?<!\\)\|/).map((c) => c.trim().replaceAll("\\|", "|"));
    assert.equal(cells.length, 4, `a Keys row without 4 cells: ${line}`);
    const key = /^`<prefix>:\{<name>\}([^`]*)`$/.exec(cells[0]);
    assert.ok(key, `a Keys row whose key is not \`<prefix>:{<name>}…\`: ${cells[0]}`);
    const source = /^`(lua\/[a-z_]+\.lua)`$/.exec(cells[3]);
    assert.ok(source, `a Keys row whose last cell names no lua/ file: ${cells[3]}`);
    const formats = [...cells[2].matchAll(/`([^`]*<[^`]*>[^`]*)`/g)].map((m) => m[1]);
    return { suffix: key[1].replace(/<[^>]*>$/, ""), formats, source: source[1] };
  });
}

describe("docs/how-it-works.md against lua/ and src/_protocol.ts", () => {
  test("the keys and channels of the table are those the code builds", () => {
    const documented = new Set(rows().map((r) => r.suffix));
    const built = new Set([""]);
    // src/_protocol.ts: `${hash}:q`, `${keys.hash}:w:${clientId}`, …
    for (const m of read("src/_protocol.ts").matchAll(/\$\{(?:keys\.)?hash\}(:[a-z]+:?)/g)) built.add(m[1]);
    // The scripts: `KEYS[1] .. ':o'`, `h .. ':o'`, `h ..':w:'.. cid`.
    for (const f of readdirSync(join(root, "lua")).filter((f) => f.endsWith(".lua"))) {
      for (const m of read(`lua/${f}`).matchAll(/\.\.\s*'(:[a-z]+:?)'/g)) built.add(m[1]);
    }
    assert.deepEqual([...documented].sort(), [...built].sort());
  });

  test("every format the table quotes is the one its Lua file defines", () => {
    const missing: string[] = [];
    let checked = 0;
    for (const r of rows()) {
      const lua = read(r.source);
      for (const f of r.formats) {
        checked++;
        if (!lua.includes(f)) missing.push(`${f} (row '${r.suffix}', ${r.source})`);
      }
    }
    // The grant record's three forms, the queue entry, the holder record, the grant message, the leader's value.
    assert.ok(checked >= 7, `only ${checked} formats found in the table`);
    assert.deepEqual(missing, [], "formats quoted in docs/how-it-works.md but not found in their Lua file");
  });

  test("every file of lua/ is named on the page, and every script it names exists", () => {
    const files = readdirSync(join(root, "lua")).filter((f) => f.endsWith(".lua")).sort();
    const named = new Set([...page.matchAll(/`(?:lua\/)?([a-z_]+\.lua)`/g)].map((m) => m[1]));
    assert.deepEqual(files.filter((f) => !named.has(f)), [], "lua/ files the page does not name");
    assert.deepEqual([...named].filter((f) => !files.includes(f)), [], "scripts the page names that lua/ lacks");
  });
});
