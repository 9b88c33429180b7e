// The packed package reads as its source does: no line of its JavaScript over 1,000 characters, a source map
// beside each file with the sources in it, and an uncaught network error that prints a few lines naming the
// cause, with stack frames on real lines (src/*.ts lines under `node --enable-source-maps`).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { closedPortUrl } from "../support/loopback.js";
import { cleanEnv, runProcess } from "../support/processes.js";
import { ensureRuntime, INSTALL_TIMEOUT_MS, project, RUN_TIMEOUT_MS } from "../support/runtimes.js";

const dist = () => join(project(), "node_modules", "etcd-edge", "dist");
const scripts = () => readdirSync(dist()).filter((file) => file.endsWith(".js"));

describe("the packed package's JavaScript", () => {
  it("has no line over 1,000 characters in any file", () => {
    expect(scripts()).toContain("index.js");
    const long = scripts().flatMap((file) =>
      readFileSync(join(dist(), file), "utf8")
        .split("\n")
        .flatMap((line, i) => (line.length > 1_000 ? [`${file}:${i + 1}: ${line.length} characters`] : [])),
    );
    expect(long).toEqual([]);
  });

  it("ships each file's source map, with the sources in it", () => {
    for (const file of scripts()) {
      expect(existsSync(join(dist(), `${file}.map`)), `${file}.map`).toBe(true);
      const map = JSON.parse(readFileSync(join(dist(), `${file}.map`), "utf8")) as {
        sources: string[];
        sourcesContent?: Array<string | null>;
      };
      const contents = (map.sourcesContent ?? []).filter((text) => typeof text === "string");
      expect(contents, file).toHaveLength(map.sources.length);
    }
    const index = JSON.parse(readFileSync(join(dist(), "index.js.map"), "utf8")) as { sources: string[] };
    expect(index.sources).toContain("../src/gateway/transport.ts");
  });
});

describe("an uncaught network error in a Node script", () => {
  const uncaught = async (flags: string[]) => {
    const node = await ensureRuntime("node24");
    const result = await runProcess(node, [...flags, "uncaught.mjs", await closedPortUrl()], {
      cwd: project(),
      env: cleanEnv(),
      timeoutMs: RUN_TIMEOUT_MS,
    });
    expect(result.code, result.stderr).toBe(1);
    return result.stdout + result.stderr;
  };

  it("prints under 3 KB, its frames on distinct lines", { timeout: INSTALL_TIMEOUT_MS }, async () => {
    const output = await uncaught([]);
    expect(Buffer.byteLength(output), output).toBeLessThan(3_000);
    expect(output).toMatch(/^EtcdError: cannot reach http:\/\/127\.0\.0\.1:\d+: /m);
    const lines = [...output.matchAll(/etcd-edge\/dist\/index\.js:(\d+):\d+\)?$/gm)].map((match) => match[1]);
    expect(lines.length, output).toBeGreaterThanOrEqual(3);
    expect(new Set(lines).size, output).toBe(lines.length);
  });

  it("under --enable-source-maps, its frames name src/*.ts lines", { timeout: INSTALL_TIMEOUT_MS }, async () => {
    const output = await uncaught(["--enable-source-maps"]);
    expect(Buffer.byteLength(output), output).toBeLessThan(3_000);
    expect(output).toMatch(/at unavailable \(\S*etcd-edge\/src\/errors\/catalogue\.ts:\d+:\d+\)$/m);
    expect(output).toMatch(/\S*etcd-edge\/src\/gateway\/transport\.ts:\d+:\d+\)$/m);
    expect(output).toMatch(/at async Etcd\.get \(\S*etcd-edge\/src\/api\/client\.ts:\d+:\d+\)$/m);
  });
});
