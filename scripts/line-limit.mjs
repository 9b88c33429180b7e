// Part of `npm run lint`: no line of the project's own source longer than 120 columns. Biome's formatter
// wraps code at 120 but leaves comments and string literals as written; this catches those too.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const LIMIT = 120;
const files = execFileSync("git", ["ls-files", "-co", "--exclude-standard", "*.ts", "*.mjs", "*.js", "*.cjs"], {
  encoding: "utf8",
})
  .split("\n")
  .filter((file) => file.length > 0 && !file.startsWith("test/etcd/fixtures/"));
const long = [];
for (const file of files) {
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    continue; // listed by git but deleted in the work tree
  }
  text.split("\n").forEach((line, i) => {
    // Columns as a reader counts them: code points, not UTF-16 units.
    const width = [...line].length;
    if (width > LIMIT) long.push(`${file}:${i + 1}: ${width} columns`);
  });
}
if (long.length > 0) {
  console.error(`${long.length} line(s) longer than ${LIMIT} columns:\n${long.join("\n")}`);
  process.exitCode = 1;
} else {
  console.log(`line limit: ${files.length} files, no line over ${LIMIT} columns`);
}
