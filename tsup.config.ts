import { defineConfig } from "tsup";

// Platform-neutral ESM: the same files load in Node, Deno, Bun, workerd and bundlers.
export default defineConfig({
  entry: { index: "src/index.ts" },
  format: ["esm"],
  platform: "neutral",
  target: "es2022",
  dts: true,
  sourcemap: true,
  clean: true,
  splitting: true,
  treeshake: true,
  external: ["zod", "base64-js", "msw", "undici"],
});
