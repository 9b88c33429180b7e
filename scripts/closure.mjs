#!/usr/bin/env node
// What a reader of a module must hold in mind: the files its static imports reach (type-only imports too, since
// a reader follows them), within a folder. `node scripts/closure.mjs [entry] [within]`, by default the mutex in
// src/lock: files, lines, and code lines (neither blank nor comment).
import { readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";

const entry = resolve(process.argv[2] ?? "src/lock/mutex/mutex.ts");
const within = resolve(process.argv[3] ?? "src/lock");
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*["'](\.[^"']+)["']/g;

const seen = new Set();
const visit = (file) => {
  if (seen.has(file) || !file.startsWith(`${within}/`)) return;
  seen.add(file);
  for (const [, spec] of readFileSync(file, "utf8").matchAll(IMPORT)) {
    visit(resolve(dirname(file), spec).replace(/\.js$/, ".ts"));
  }
};
visit(entry);

let lines = 0;
let code = 0;
const rows = [];
for (const file of [...seen].sort()) {
  const text = readFileSync(file, "utf8");
  const all = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
  // Code lines: what is left once block comments, line comments and blank lines are taken out.
  const bare = text.replace(/\/\*[\s\S]*?\*\//g, (c) => "\n".repeat(c.split("\n").length - 1));
  const own = bare.split("\n").filter((line) => line.trim() !== "" && !line.trim().startsWith("//")).length;
  lines += all;
  code += own;
  rows.push(`${String(all).padStart(5)} ${String(own).padStart(5)}  ${relative(process.cwd(), file)}`);
}
console.log(rows.join("\n"));
console.log(
  `${seen.size} files, ${lines} lines, ${code} code lines (${Math.round((100 * (lines - code)) / lines)}% other)`,
);
