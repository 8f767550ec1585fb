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
export function aclOfDoc(block: "acl" | "acl-cluster", fill: Fill): string[][] {
  const text = readFileSync(DOC, "utf8");
  const m = new RegExp(`<!-- ${block}:begin[^>]*-->\\s*\`\`\`text\\n([\\s\\S]*?)\`\`\`\\s*<!-- ${block}:end -->`).exec(
    text,
  );
  assert.ok(
    m,
    `docs/security.md has a ${block} block: <!-- ${block}:begin … --> \`\`\`text … \`\`\` <!-- ${block}:end -->`,
  );
  const lines = m[1].split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
  return lines.map((line) => {
    const words = line.replace("<password>", fill.password).replace("<resource keys>", fill.resources)
      .replace("<your scripts' commands>", fill.scriptCommands).split(/\s+/);
    assert.deepEqual(words.slice(0, 2), ["ACL", "SETUSER"], `not an ACL SETUSER line: ${line}`);
    return words;
  });
}

/** What ACL SETUSER lines grant: their `+command` and `+command|sub` words, without the `+`. */
export function grantedBy(acl: readonly string[][]): Set<string> {
  return new Set(acl.flatMap((w) => w.slice(3)).filter((w) => w.startsWith("+")).map((w) => w.slice(1)));
}
