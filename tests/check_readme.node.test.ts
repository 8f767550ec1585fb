// scripts/check_readme.ts on READMEs of its own (its FILE.md arguments): every block a reader would take for
// TypeScript or JavaScript is type-checked, wherever CommonMark puts it (a list item, a ~~~ fence, an info string
// with a title), a marker that marks nothing fails the check instead of being skipped, and so does a relative link
// to a file or heading that does not exist. Node only: the checker
// type-checks with TypeScript programs of its own, and the runs need redis-server.
// (From the review "check_readme silently skips blocks".)
//
// A checker run costs seconds (TypeScript programs for v5 and v4, redis-server and a process per block that runs),
// so the runs are shared: every failing case is a README of its own, and all of them go to one run (the checker
// takes several FILE.md, each parsed on its own: a fence never closed ends only its own file); the case that must
// pass (exit code 0) has a run of its own. Both start at once, and each test asserts its own lines in its run's
// output. Every line a test asserts names its own README (`FILE`), so another case's block cannot produce it; a
// count of blocks is counted over its own README's lines, not taken from the summary of the run. The exit code 1 is
// the run's, not a case's: a test of its own checks that the run counts every case's lines as problems.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { runProcess } from "./_redis.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dir = mkdtempSync(join(tmpdir(), "redlease-check-readme-test-"));

after(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  readonly code: number | null;
  readonly out: string;
  /** Each README's name to its file. */
  readonly files: Readonly<Record<string, string>>;
}

/** Writes each README to a file of its own (NAME.md) and runs the checker once on all of them. */
function check(readmes: Record<string, string>): Promise<Run> {
  const files = Object.fromEntries(Object.keys(readmes).map((name) => [name, join(dir, `${name}.md`)]));
  for (const [name, text] of Object.entries(readmes)) writeFileSync(files[name], text);
  const run = runProcess(process.execPath, ["--import", "tsx", "scripts/check_readme.ts", ...Object.values(files)], {
    cwd: root,
    env: { ...process.env, NO_COLOR: "1" },
    timeoutMs: 90_000,
  }).then((r): Run => {
    const out = r.stdout + r.stderr;
    // The checker ran to its summary line (not a crash of its own).
    assert.match(r.stdout, /blocks type-checked/, out);
    return { code: r.code, out, files };
  });
  // The tests await it; until then, a failure is not an unhandled rejection.
  run.catch(() => {});
  return run;
}

/** Asserts that the run failed, and that its output has each of `lines` (`FILE` standing for README `name`). */
function failed(r: Run, name: string, ...lines: string[]): void {
  assert.equal(r.code, 1, r.out);
  for (const l of lines) {
    assert.ok(r.out.includes(l.replaceAll("FILE", r.files[name])), `missing '${l}' for ${name}.md in:\n${r.out}`);
  }
}

/** The lines of the output that start with `prefix` (`FILE` standing for README `name`). */
function linesOf(r: Run, name: string, prefix: string): string[] {
  const p = prefix.replaceAll("FILE", r.files[name]);
  return r.out.split("\n").filter((l) => l.startsWith(p));
}

/** The blocks the checker found in README `name`: its "ok"/"FAIL" lines. */
function blocksOf(r: Run, name: string): string[] {
  return [...linesOf(r, name, "ok   FILE:"), ...linesOf(r, name, "FAIL FILE:")];
}

/** docs/api/ from the folder of the READMEs. */
const api = relative(dir, join(root, "docs", "api"));
const broken = 'const n: number = "not a number";\n';
const brokenJs = '/** @type {number} */\nconst n = "not a number";\n';
const typeError = "TS2322: Type 'string' is not assignable to type 'number'.";

const failing = check({
  plain: "# x\n\n```ts\n" + broken + "```\n",
  "list-item": "# x\n\n1. Acquire:\n\n   ```ts\n   " + broken + "   ```\n",
  extensions: "# x\n\n```mts\n" + broken + "```\n\n```cts\n" + broken + "```\n\n```mjs\n" + brokenJs +
    "```\n\n```cjs\n" + brokenJs + "```\n\n```tsx\nconst ok = 1;\n```\n\n```jsx\nconst ok = 1;\n```\n",
  title: '# x\n\n```ts title="a.ts"\nconst ok = 1;\n```\n\ntext\n\n```ts\n' + broken + "```\n",
  tilde: "# x\n\n~~~ts\n" + broken + "~~~\n",
  "tilde-long": "# x\n\n~~~~ts\nconst js = 1;\n~~~\n~~~js\n" + broken + "~~~~\n",
  "unclosed-backtick": "# x\n\n```ts\nconst ok = 1;\n```js\n",
  "unclosed-tilde": "# x\n\n~~~~ts\nconst ok = 1;\n~~~\n",
  "deep-fence": "# x\n\n- a\n  - b\n\n    ```ts\n    const ok = 1;\n    ```\n",
  "indented-run": "# x\n\n  <!-- run -->\n```ts\nprocess.exit(1);\n```\n",
  "marks-nothing": "# x\n\n<!-- run -->\n\n```ts\nprocess.exit(1);\n```\n\n<!-- fragment -->\ntext\n",
  "v5-only-double": '# x\n\n```ts\nimport { createClientPool } from "redis";\ncreateClientPool();\n```\n',
  "v5-only-single": "# x\n\n```ts\nimport { createClientPool } from 'redis';\ncreateClientPool();\n```\n",
  crlf: "# x\r\n\r\n```ts\r\n" + broken.trimEnd() + "\r\n```\r\n",
  "crlf-run": "# x\r\n\r\n<!--   run   -->\r\n```ts\r\nprocess.exit(1);\r\n```\r\n",
  "typescript-word": "# x\n\n```TypeScript\n" + broken + "```\n",
  links: "# x\n\n## Some `code` heading!\n\n[a](./missing.md) [b](#nope) [c](#some-code-heading) " +
    "[d](./links.md#some-code-heading) [e](./links.md#zz)\n\n" +
    // The API reference is generated, not committed: links into docs/api/ resolve in a build of it.
    `[f](${api}/~/acquire.html) [g](${api}/) [h](${api}/~/noSuchSymbol.html)\n`,
});

const passing = check({
  pass: [
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
    "[self](#x), [web](https://example.com/missing.md), `[code](missing.md)`",
    "",
    "```text",
    "[in a fence](missing.md)",
    "```",
    "",
    "<!-- note: not a marker -->",
    "",
    "```sh",
    "npm install redlease",
    "```",
    "",
  ].join("\n"),
});

describe("check_readme", { concurrency: true }, () => {
  test("a plain ```ts block with a type error fails, at its README line", async () => {
    failed(await failing, "plain", "FAIL FILE:3 ts", `FILE:4:7: ${typeError}`);
  });

  test("a block indented in a list item is checked, its error at its README column", async () => {
    failed(await failing, "list-item", "FAIL FILE:5 ts", `FILE:6:10: ${typeError}`);
  });

  test("```mts, ```cts, ```mjs and ```cjs blocks are checked; ```tsx and ```jsx fail as not checkable", async () => {
    const r = await failing;
    failed(
      r,
      "extensions",
      "FAIL FILE:3 mts",
      "FAIL FILE:7 cts",
      "FAIL FILE:11 mjs",
      "FAIL FILE:16 cjs",
      "FILE:21: a 'tsx' block, which is not checked",
      "FILE:25: a 'jsx' block, which is not checked",
    );
    assert.equal(blocksOf(r, "extensions").length, 4, r.out);
  });

  test("an info string with a title: the block is checked, and its closing fence does not open the next", async () => {
    const r = await failing;
    failed(r, "title", "ok   FILE:3 ts", "FAIL FILE:9 ts");
    assert.equal(blocksOf(r, "title").length, 2, r.out);
  });

  test("~~~ fences, and a fence closed only by one as long as itself", async () => {
    const r = await failing;
    failed(r, "tilde", "FAIL FILE:3 ts");
    // The inner ~~~ (too short) and ~~~js (an info string) do not close the ~~~~ block (they are TypeScript too,
    // `~~~js`): its error is at line 7.
    failed(r, "tilde-long", "FAIL FILE:3 ts", `FILE:7:7: ${typeError}`);
  });

  test("a fence never closed fails", async () => {
    const r = await failing;
    failed(r, "unclosed-backtick", "FILE:3: the fence '```ts' is never closed");
    failed(r, "unclosed-tilde", "FILE:3: the fence '~~~~ts' is never closed");
  });

  test("a ts fence indented 4 spaces or more fails as not checked", async () => {
    failed(await failing, "deep-fence", "FILE:6: a 'ts' fence indented 4 spaces or more, which is not checked");
  });

  test("an indented <!-- run --> marker runs its block", async () => {
    failed(await failing, "indented-run", "FILE:4: the block exited with code 1");
  });

  test("a marker not on the line right before its fence fails: it marks nothing", async () => {
    failed(
      await failing,
      "marks-nothing",
      "FILE:3: the marker '<!-- run -->' is not on the line right before a fence",
      "FILE:9: the marker '<!-- fragment -->' is not on the line right before a fence",
    );
  });

  test("a v5-only API imported from 'redis' or \"redis\" fails the node-redis v4 check", async () => {
    const r = await failing;
    for (const name of ["v5-only-double", "v5-only-single"]) {
      failed(r, name, "FAIL FILE:3 ts");
      // Its error, at the import, for v4 only.
      const v4 = linesOf(r, name, "FILE:4:").filter((l) => l.endsWith("[node-redis v4 only]"));
      assert.equal(v4.length, 1, `no v4-only error for ${name}.md in:\n${r.out}`);
    }
  });

  test("CRLF line endings, a marker with extra spaces, ```TypeScript are all checked", async () => {
    const r = await failing;
    failed(r, "crlf", "FAIL FILE:3 ts");
    failed(r, "crlf-run", "FILE:4: the block exited with code 1");
    failed(r, "typescript-word", "FAIL FILE:3 ts");
  });

  test("a relative link to a missing file or heading fails; one to a heading GitHub makes passes", async () => {
    const r = await failing;
    failed(
      r,
      "links",
      "FILE:5: the link './missing.md' names a file that does not exist",
      "FILE:5: the link '#nope' names no heading of",
      "FILE:5: the link './links.md#zz' names no heading of",
    );
    assert.equal(r.out.split("\n").filter((l) => l.startsWith(`${r.files.links}:5:`)).length, 3, r.out);
  });

  test("a link into the generated API reference resolves in a build of it: a symbol it lacks fails", async () => {
    const r = await failing;
    failed(r, "links", `FILE:7: the link '${api}/~/noSuchSymbol.html' names a file that does not exist`);
    assert.equal(r.out.split("\n").filter((l) => l.startsWith(`${r.files.links}:7:`)).length, 1, r.out);
  });

  test("each failing case's lines are problems of the run, which fail it: the run counts them all", async () => {
    // The lines the tests above assert, as problems (not as notes that would not fail the check): 1 per type
    // error (plain, list-item, title, tilde, tilde-long, the CRLF block, TypeScript-word; 4 in extensions), per
    // v4-only error (2), per block that exited with code 1 (2), and per line about a fence or a marker (tsx, jsx,
    // 2 never closed, 1 indented 4 spaces, 2 marking nothing), and per broken link (4). A case alone in its run
    // would fail the run by itself; here the count shows that none of them leaves it to the others. And 2 run (indented-run, crlf-run):
    // the block under marks-nothing's marker does not.
    const r = await failing;
    assert.match(r.out, /^\d+ blocks type-checked in [\d.]+ s, 2 run; [\d.]+ s in all; 26 problem\(s\)$/m, r.out);
  });

  test("blocks in all those forms pass when they are right", async () => {
    const r = await passing;
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
