// Docs that resolve wherever the README is read: every link of the installed package's README.md, docs/ and
// examples' READMEs (node_modules/etcd-edge/, as `npm pack` left it) points at a file the package ships, and
// every anchor at a heading of that file; an error that names a page of the docs names one the package ships.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { project } from "../support/runtimes.js";

const root = () => join(project(), "node_modules", "etcd-edge");

/** Every Markdown file the package ships. */
function pages(dir = root()): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (entry === "node_modules") return [];
    if (statSync(path).isDirectory()) return pages(path);
    return entry.endsWith(".md") ? [path] : [];
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** A page's anchors, as GitHub makes them: a heading seen before gets `-1`, `-2`... */
function anchors(file: string): Set<string> {
  const text = readFileSync(file, "utf8").replace(/^```[\s\S]*?^```/gm, "");
  const seen = new Map<string, number>();
  return new Set(
    [...text.matchAll(/^#{1,6} (.+)$/gm)].map((match) => {
      const base = slug(match[1]!);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      return count === 0 ? base : `${base}-${count}`;
    }),
  );
}

/** The links of a page outside code: `[text](target)`, without web addresses. */
function links(file: string): string[] {
  const text = readFileSync(file, "utf8")
    .replace(/^```[\s\S]*?^```/gm, "")
    .replace(/`[^`\n]*`/g, "");
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]!).filter((to) => !/^[a-z]+:/i.test(to));
}

describe("the installed package's documentation", () => {
  it("ships the pages and examples the README links to", () => {
    const shipped = pages().map((file) => relative(root(), file));
    expect(shipped).toEqual(
      expect.arrayContaining([
        "README.md",
        "docs/protocol.md",
        "docs/testing.md",
        "docs/tls.md",
        "examples/lambda/README.md",
        "examples/workers/README.md",
      ]),
    );
  });

  it("every link resolves to a file it ships, every anchor to a heading", () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of pages()) {
      for (const link of links(file)) {
        checked++;
        const [path, anchor] = link.split("#") as [string, string | undefined];
        const target = path === "" ? file : normalize(join(dirname(file), decodeURI(path)));
        const where = `${relative(root(), file)} → ${link}`;
        if (!target.startsWith(root()) || !existsSync(target)) broken.push(`${where}: not in the package`);
        else if (anchor !== undefined && !anchors(target).has(anchor)) broken.push(`${where}: no such heading`);
      }
    }
    expect(broken).toEqual([]);
    // Not vacuous: the README alone links to its own sections and to docs/ and examples/.
    expect(checked).toBeGreaterThan(30);
  });

  it("every page of the docs an error names is shipped", () => {
    const dist = join(root(), "dist");
    const named = new Set(
      readdirSync(dist)
        .filter((file) => file.endsWith(".js"))
        .flatMap((file) => [...readFileSync(join(dist, file), "utf8").matchAll(/etcd-edge's (docs\/[\w.-]+\.md)/g)])
        .map((match) => match[1]!),
    );
    expect([...named]).toContain("docs/tls.md");
    for (const page of named) expect(existsSync(join(root(), page)), page).toBe(true);
  });

  it("every README section an error names is a heading of the shipped README", () => {
    const dist = join(root(), "dist");
    const sections = new Set(
      readdirSync(dist)
        .filter((file) => file.endsWith(".js"))
        .flatMap((file) => [
          ...readFileSync(join(dist, file), "utf8").matchAll(/etcd-edge's README, \\?"([^"\\]+)\\?"/g),
        ])
        .map((match) => match[1]!),
    );
    expect([...sections]).toContain("RBAC: what a lock user needs");
    const headings = anchors(join(root(), "README.md"));
    for (const section of sections) expect(headings.has(slug(section)), section).toBe(true);
  });
});
