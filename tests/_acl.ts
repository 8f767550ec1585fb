// The ACL of docs/security.md as the tests use it: its marked blocks of `ACL SETUSER` lines, read from the doc so the
// two cannot drift, with the placeholders filled in.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const DOC = join(dirname(fileURLToPath(import.meta.url)), "..", "docs", "security.md");

/** What the tests put for the doc's placeholders. */
export interface Fill {
  readonly password: string;
  /** The pattern of the keys the test's fenced writes guard. */
  readonly resources: string;
  /** The commands of the test's fencedEval scripts, as `+cmd` words. */
  readonly scriptCommands: string;
}

/**
 * The `ACL SETUSER` commands of the doc's block marked `<!-- BLOCK:begin … -->` … `<!-- BLOCK:end -->` (a ```text
 * fence), as argument lists with the placeholders filled in.
 */
export function aclOfDoc(block: "acl" | "acl-cluster" | "acl-glide", fill: Fill): string[][] {
  const text = readFileSync(DOC, "utf8");
  return linesOf(text, block).map((line) => {
    const words = line.replace("<password>", fill.password).replace("<resource keys>", fill.resources)
      .replace("<your scripts' commands>", fill.scriptCommands).split(/\s+/);
    assert.deepEqual(words.slice(0, 2), ["ACL", "SETUSER"], `not an ACL SETUSER line: ${line}`);
    return words;
  });
}

/** The lines of the doc's marked block, without comments and blank lines, placeholders left as they are. */
function linesOf(text: string, block: string): string[] {
  const m = new RegExp(`<!-- ${block}:begin[^>]*-->\\s*\`\`\`text\\n([\\s\\S]*?)\`\`\`\\s*<!-- ${block}:end -->`).exec(
    text,
  );
  assert.ok(
    m,
    `docs/security.md has a ${block} block: <!-- ${block}:begin … --> \`\`\`text … \`\`\` <!-- ${block}:end -->`,
  );
  return m[1].split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
}

/**
 * The doc's runnable example sets the user up with its own copy of the rules (a program readers run): the strings of
 * its `const rules = [ … ]`, and what they must be, the acl block's lines after `ACL SETUSER <user>` with the
 * example's password for `<password>`, but the fenced-writes line (the example writes no resource).
 */
export function exampleRules(): { readonly example: string[]; readonly block: string[] } {
  const text = readFileSync(DOC, "utf8");
  const m = /<!-- run -->\s*```ts\n[\s\S]*?const rules = \[([\s\S]*?)\];[\s\S]*?url\.password = "([^"]+)"/.exec(text);
  assert.ok(m, 'docs/security.md has a run block with `const rules = [ … ]` and `url.password = "…"`');
  const example = [...m[1].matchAll(/"([^"]*)"/g)].map((r) => r[1]);
  const block = linesOf(text, "acl").filter((l) => !l.includes("<resource keys>"))
    .map((l) => l.split(/\s+/).slice(3).join(" ").replace("<password>", m[2]));
  return { example, block };
}

/** What ACL SETUSER lines grant: their `+command` and `+command|sub` words, without the `+`. */
export function grantedBy(acl: readonly string[][]): Set<string> {
  return new Set(acl.flatMap((w) => w.slice(3)).filter((w) => w.startsWith("+")).map((w) => w.slice(1)));
}
