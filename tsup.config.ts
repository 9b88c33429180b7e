import { defineConfig, type Options } from "tsup";

const shared: Options = {
  format: ["esm"],
  target: "es2022",
  dts: true,
  sourcemap: true,
  clean: false,
  treeshake: true,
  external: ["base64-js", "msw", "undici"],
};

export default defineConfig([
  // Platform-neutral ESM: the same files load in Node, Deno, Bun, workerd and bundlers.
  { ...shared, entry: { index: "src/index.ts", testing: "src/testing/index.ts" }, platform: "neutral", splitting: true },
  // Node-only speedups, behind their own entry so edge bundles never see them.
  { ...shared, entry: { node: "src/node/index.ts" }, platform: "node", splitting: false },
]);
