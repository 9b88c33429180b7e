#!/usr/bin/env node
// The mutation score per folder of src/lock and the survivors, from a StrykerJS JSON report (the mutation testing
// report schema): `node scripts/mutation-report.mjs [.cache/stryker/mutation.json] [--survivors]`. The score is
// Stryker's: detected (killed or timed out) over every mutant that ran or that no test covers.
import { readFileSync } from "node:fs";

const path = process.argv.slice(2).find((arg) => !arg.startsWith("--")) ?? ".cache/stryker/mutation.json";
const listSurvivors = process.argv.includes("--survivors");
const report = JSON.parse(readFileSync(path, "utf8"));

const DETECTED = new Set(["Killed", "Timeout"]);
const UNDETECTED = new Set(["Survived", "NoCoverage"]);
const folders = new Map();
const survivors = [];
for (const [file, { mutants }] of Object.entries(report.files)) {
  const relative = file.replace(/^.*?src\/lock\//, "");
  const folder = relative.includes("/") ? relative.split("/")[0] : "(loose)";
  const row = folders.get(folder) ?? { detected: 0, undetected: 0 };
  for (const mutant of mutants) {
    if (DETECTED.has(mutant.status)) row.detected++;
    else if (UNDETECTED.has(mutant.status)) {
      row.undetected++;
      const { line, column } = mutant.location.start;
      survivors.push(`${relative}:${line}:${column} ${mutant.status} ${mutant.mutatorName}: ${mutant.replacement}`);
    }
  }
  folders.set(folder, row);
}

const score = ({ detected, undetected }) =>
  detected + undetected === 0 ? 100 : (100 * detected) / (detected + undetected);
const line = (name, row) => {
  const counts = [row.detected + row.undetected, row.detected, row.undetected];
  const cells = counts.map((n, i) => String(n).padStart(i === 0 ? 8 : 9));
  return `${name.padEnd(12)} ${cells.join(" ")}  ${score(row).toFixed(1)}%`;
};
let all = { detected: 0, undetected: 0 };
console.log("folder        mutants  detected  survived  score");
for (const [folder, row] of [...folders].sort(([a], [b]) => a.localeCompare(b))) {
  all = { detected: all.detected + row.detected, undetected: all.undetected + row.undetected };
  console.log(line(folder, row));
}
console.log(line("src/lock", all));
if (listSurvivors) console.log(`\n${survivors.length} survivors:\n${survivors.join("\n")}`);
