// Plain-text tables that line up in any terminal. `align` has one letter per column, "l" or "r"; by
// default the first column is left-aligned and the figures after it right-aligned.

export function printTable(header, rows, { indent = "   ", align } = {}) {
  const all = [header, ...rows].map((row) => row.map((cell) => String(cell ?? "")));
  const widths = header.map((_, col) => Math.max(...all.map((row) => row[col]?.length ?? 0)));
  const left = (col) => (align ? align[col] === "l" : col === 0);
  const line = (row) =>
    row
      .map((cell, col) => (left(col) ? cell.padEnd(widths[col]) : cell.padStart(widths[col])))
      .join("  ")
      .trimEnd();
  console.log(indent + line(all[0]));
  console.log(indent + widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of all.slice(1)) console.log(indent + line(row));
}
