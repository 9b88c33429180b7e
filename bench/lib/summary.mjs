// The final table: each figure that issues 8, 11 and 24 set a target for, the target beside it, and whether
// this run met it. A row whose figure could not be measured says so instead of passing.
import { printTable } from "./table.mjs";

export class Summary {
  #rows = [];

  /** `pass`: true, false, or undefined when the figure is missing or informational. */
  add(section, what, value, target, pass) {
    this.#rows.push([section, what, value, target, pass === undefined ? "" : pass ? "yes" : "NO"]);
  }

  print() {
    if (this.#rows.length === 0) return;
    console.log("\nSummary: targets from issues 8, 11 and 24");
    printTable(["§", "what", "this run", "target", "met"], this.#rows, { indent: "  ", align: "rlrll" });
    const missed = this.#rows.filter((row) => row[4] === "NO").length;
    console.log(`\n  ${missed === 0 ? "every measured target met" : `${missed} target(s) not met`}`);
  }
}

/** Whether `value` meets `target` in the given direction; undefined when there is no number. */
export function meets(value, op, target) {
  if (!Number.isFinite(value)) return undefined;
  return op === "<=" ? value <= target : value >= target;
}
