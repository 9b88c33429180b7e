// One version: package.json's, the one the client sends in its User-Agent (src/version.ts, also the otel
// instrumentation scope's), and the newest CHANGELOG heading's.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { VERSION } from "../../src/version.js";

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), "utf8");

describe("the package's version", () => {
  it("is the same in package.json, package-lock.json, src/version.ts and the newest CHANGELOG heading", () => {
    const pkg = JSON.parse(read("package.json")) as { version: string };
    const lock = JSON.parse(read("package-lock.json")) as { version: string; packages: { "": { version: string } } };
    const newest = /^## (\d+\.\d+\.\d+)/m.exec(read("CHANGELOG.md"))?.[1];
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect([VERSION, lock.version, lock.packages[""].version, newest]).toEqual([
      pkg.version,
      pkg.version,
      pkg.version,
      pkg.version,
    ]);
  });
});
