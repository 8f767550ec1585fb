/**
 * Fails when a function of src/ runs over 50 lines without saying why: a function, method, constructor, accessor,
 * function expression or arrow function whose body spans more than MAX_LINES lines (from its first token to its
 * last, as the TypeScript compiler parses src/**\/*.ts) must have a comment line starting with `// Long:` directly
 * above it, or above the line its declaration starts on (its `export`, the `const` it is assigned to, the property
 * or `return` it is the value of). The comment may run on over further `//` lines. Prints one line per function
 * (`file:line name (n lines)`) and exits 1; otherwise prints "functions: <n> files, none over 50 lines without a
 * // Long: reason".
 *
 *   node --import tsx scripts/check_functions.ts
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const MAX_LINES = 50;
const REASON = "// Long:";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src");

/** Every .ts file below `dir`, as absolute paths. */
const files = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts")).map((f) => join(dir, f));

function isFunction(node: ts.Node): node is ts.FunctionLikeDeclaration {
  return (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node) || ts.isConstructorDeclaration(node) || ts.isGetAccessor(node) ||
    ts.isSetAccessor(node)) && node.body !== undefined;
}

/** What a function is called in the report: its own name, else the variable or property it is the value of. */
function nameOf(fn: ts.FunctionLikeDeclaration): string {
  if (fn.name) return fn.name.getText();
  if (ts.isConstructorDeclaration(fn)) return "constructor";
  const parent = fn.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) && parent.name) {
    return parent.name.getText();
  }
  return ts.isArrowFunction(fn) ? "(arrow)" : "(function)";
}

/**
 * The lines a `// Long:` comment may stand above (0-based): the function's first line, then that of each enclosing
 * node up to the statement, class member or property that holds it (a `const f = () => …`, `export function`,
 * `return (e) => …`, `method: () => …`).
 */
function declarationLines(fn: ts.Node, file: ts.SourceFile): Set<number> {
  const lines = new Set<number>();
  for (let node: ts.Node = fn; node !== file; node = node.parent) {
    lines.add(file.getLineAndCharacterOfPosition(node.getStart(file)).line);
    if (node !== fn && (ts.isStatement(node) || ts.isClassElement(node) || ts.isObjectLiteralElement(node))) break;
  }
  return lines;
}

/** Whether the `//` comment lines directly above `line` (0-based) include one starting with `// Long:`. */
function hasReason(lines: readonly string[], line: number): boolean {
  for (let above = line - 1; above >= 0; above--) {
    const text = lines[above].trim();
    if (!text.startsWith("//")) return false;
    if (text.startsWith(REASON)) return true;
  }
  return false;
}

const problems: string[] = [];
const all = files(src).sort();
for (const path of all) {
  const text = readFileSync(path, "utf8");
  const lines = text.split("\n");
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const visit = (node: ts.Node): void => {
    if (isFunction(node)) {
      const first = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
      const last = file.getLineAndCharacterOfPosition(node.getEnd()).line;
      const length = last - first + 1;
      if (length > MAX_LINES && ![...declarationLines(node, file)].some((line) => hasReason(lines, line))) {
        problems.push(`${relative(root, path).replaceAll("\\", "/")}:${first + 1} ${nameOf(node)} (${length} lines)`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
}

if (problems.length > 0) {
  console.error(
    `functions over ${MAX_LINES} lines without a '${REASON}' comment above them (split them, or say why not):`,
  );
  for (const problem of problems) console.error(`  ${problem}`);
  process.exit(1);
}
console.log(`functions: ${all.length} files, none over ${MAX_LINES} lines without a ${REASON} reason`);
