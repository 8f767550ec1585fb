// scripts/check_readme.ts on READMEs of its own (its FILE.md argument): every block a reader would take for
// TypeScript or JavaScript is type-checked, wherever CommonMark puts it (a list item, a ~~~ fence, an info string
// with a title), and a marker that marks nothing fails the check instead of being skipped. Node only: each case
// type-checks with a TypeScript program of its own, and the runs need redis-server.
// (From the review "check_readme silently skips blocks".)
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { runProcess } from "./_redis.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dir = mkdtempSync(join(tmpdir(), "redlease-check-readme-test-"));
let n = 0;

after(() => rmSync(dir, { recursive: true, force: true }));

/** Writes `readme` to a file of its own and runs the checker on it. */
async function check(readme: string): Promise<{ code: number | null; out: string; file: string }> {
  const file = join(dir, `README${++n}.md`);
  writeFileSync(file, readme);
  const r = await runProcess(process.execPath, ["--import", "tsx", "scripts/check_readme.ts", file], {
    cwd: root,
    env: { ...process.env, NO_COLOR: "1" },
    timeoutMs: 90_000,
  });
  const out = r.stdout + r.stderr;
  // The checker ran to its summary line (not a crash of its own).
  assert.match(r.stdout, /blocks type-checked/, out);
  return { code: r.code, out, file };
}

/** Asserts that the checker failed, and that its output has each of `lines` (`FILE` standing for the README). */
function failed(r: { code: number | null; out: string; file: string }, ...lines: string[]): void {
  assert.equal(r.code, 1, r.out);
  for (const l of lines) assert.ok(r.out.includes(l.replaceAll("FILE", r.file)), `missing '${l}' in:\n${r.out}`);
}

const broken = 'const n: number = "not a number";\n';
const brokenJs = '/** @type {number} */\nconst n = "not a number";\n';
const typeError = "TS2322: Type 'string' is not assignable to type 'number'.";

describe("check_readme", { concurrency: 2 }, () => {
  test("a plain ```ts block with a type error fails, at its README line", async () => {
    failed(await check("# x\n\n```ts\n" + broken + "```\n"), "FAIL FILE:3 ts", `FILE:4:7: ${typeError}`);
  });

  test("a block indented in a list item is checked, its error at its README column", async () => {
    failed(
      await check("# x\n\n1. Acquire:\n\n   ```ts\n   " + broken + "   ```\n"),
      "FAIL FILE:5 ts",
      `FILE:6:10: ${typeError}`,
    );
  });

  test("```mts, ```cts, ```mjs and ```cjs blocks are checked; ```tsx and ```jsx fail as not checkable", async () => {
    const r = await check(
      "# x\n\n```mts\n" + broken + "```\n\n```cts\n" + broken + "```\n\n```mjs\n" + brokenJs + "```\n\n```cjs\n" +
        brokenJs + "```\n\n```tsx\nconst ok = 1;\n```\n\n```jsx\nconst ok = 1;\n```\n",
    );
    failed(
      r,
      "FAIL FILE:3 mts",
      "FAIL FILE:7 cts",
      "FAIL FILE:11 mjs",
      "FAIL FILE:16 cjs",
      "FILE:21: a 'tsx' block, which is not checked",
      "FILE:25: a 'jsx' block, which is not checked",
    );
    assert.match(r.out, /^4 blocks type-checked/m);
  });

  test("an info string with a title: the block is checked, and its closing fence does not open the next", async () => {
    const r = await check('# x\n\n```ts title="a.ts"\nconst ok = 1;\n```\n\ntext\n\n```ts\n' + broken + "```\n");
    failed(r, "ok   FILE:3 ts", "FAIL FILE:9 ts");
    assert.match(r.out, /^2 blocks type-checked/m);
  });

  test("~~~ fences, and a fence closed only by one as long as itself", async () => {
    failed(await check("# x\n\n~~~ts\n" + broken + "~~~\n"), "FAIL FILE:3 ts");
    // The inner ~~~ (too short) and ~~~js (an info string) do not close the ~~~~ block (they are TypeScript too,
    // `~~~js`): its error is at line 7.
    failed(
      await check("# x\n\n~~~~ts\nconst js = 1;\n~~~\n~~~js\n" + broken + "~~~~\n"),
      "FAIL FILE:3 ts",
      `FILE:7:7: ${typeError}`,
    );
  });

  test("a fence never closed fails", async () => {
    failed(await check("# x\n\n```ts\nconst ok = 1;\n```js\n"), "FILE:3: the fence '```ts' is never closed");
    failed(await check("# x\n\n~~~~ts\nconst ok = 1;\n~~~\n"), "FILE:3: the fence '~~~~ts' is never closed");
  });

  test("a ts fence indented 4 spaces or more fails as not checked", async () => {
    failed(
      await check("# x\n\n- a\n  - b\n\n    ```ts\n    const ok = 1;\n    ```\n"),
      "FILE:6: a 'ts' fence indented 4 spaces or more, which is not checked",
    );
  });

  test("an indented <!-- run --> marker runs its block", async () => {
    failed(
      await check("# x\n\n  <!-- run -->\n```ts\nprocess.exit(1);\n```\n"),
      "FILE:4: the block exited with code 1",
    );
  });

  test("a marker not on the line right before its fence fails: it marks nothing", async () => {
    failed(
      await check("# x\n\n<!-- run -->\n\n```ts\nprocess.exit(1);\n```\n\n<!-- fragment -->\ntext\n"),
      "FILE:3: the marker '<!-- run -->' is not on the line right before a fence",
      "FILE:9: the marker '<!-- fragment -->' is not on the line right before a fence",
    );
  });

  test("a v5-only API imported from 'redis' or \"redis\" fails the node-redis v4 check", async () => {
    for (const q of [`"`, `'`]) {
      const r = await check(
        `# x\n\n\`\`\`ts\nimport { createClientPool } from ${q}redis${q};\ncreateClientPool();\n\`\`\`\n`,
      );
      failed(r, "FAIL FILE:3 ts", "[node-redis v4 only]");
    }
  });

  test("CRLF line endings, a marker with extra spaces, ```TypeScript are all checked", async () => {
    failed(await check("# x\r\n\r\n```ts\r\n" + broken.trimEnd() + "\r\n```\r\n"), "FAIL FILE:3 ts");
    failed(
      await check("# x\r\n\r\n<!--   run   -->\r\n```ts\r\nprocess.exit(1);\r\n```\r\n"),
      "FILE:4: the block exited with code 1",
    );
    failed(await check("# x\n\n```TypeScript\n" + broken + "```\n"), "FAIL FILE:3 ts");
  });

  test("blocks in all those forms pass when they are right", async () => {
    const r = await check(
      [
        "# x",
        "",
        "1. Connect:",
        "",
        "   <!-- run -->",
        '   ```TS title="a.ts"',
        "   import { createClient } from 'redis';",
        "   const client = createClient({ url: process.env.REDIS_URL });",
        "   await client.connect();",
        "",
        "   await client.quit();",
        "   ```",
        "",
        "~~~mts",
        "const a: number = 1;",
        "~~~",
        "",
        "<!-- run -->",
        "```cjs",
        'const { readFileSync } = require("node:fs");',
        "console.log(typeof readFileSync);",
        "```",
        "",
        "````ts",
        "// ```",
        'const d: string = "```";',
        "````",
        "",
        "<!-- note: not a marker -->",
        "",
        "```sh",
        "npm install redlease",
        "```",
        "",
      ].join("\n"),
    );
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /^4 blocks type-checked in [\d.]+ s, 2 run;/m);
  });

  test("an unknown option fails", async () => {
    const r = await runProcess(process.execPath, ["--import", "tsx", "scripts/check_readme.ts", "--bogus"], {
      cwd: root,
      timeoutMs: 30_000,
    });
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /unknown option '--bogus'/);
  });
});
