// The fenced code blocks of the repository's docs, for tests that run a doc's recipes or configurations as written.
// Imports nothing but Node's modules: plain Node (the bench) loads it too.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The fenced blocks of `lang` under the heading `heading` (its exact text), before the next heading. */
export function codeBlocks(doc: string, heading: string, lang: string): string[] {
  const text = readFileSync(`${REPO_ROOT}${doc}`, "utf8");
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${doc} has no heading "${heading}"`);
  const section = text.slice(start + heading.length + 2).split(/\n#+ /)[0]!;
  const blocks = [...section.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, "g"))].map((m) => m[1]!);
  if (blocks.length === 0) throw new Error(`${doc}, "${heading}": no ${lang} block`);
  return blocks;
}
