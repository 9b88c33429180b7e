import { readFile } from "node:fs/promises";
import type { Plugin } from "esbuild";
import { defineConfig, type Options } from "tsup";

// base64-js is CommonJS: bundled as it is, every bundle of ours carries esbuild's CommonJS wrapper and interop
// helpers for it (about 300 B gzipped of the main entry). Its index.js does nothing with `exports` but assign its
// functions to it, so it is loaded as the ES module that exports them; the build fails if that ever changes.
const base64AsModule: Plugin = {
  name: "base64-js-as-module",
  setup(build) {
    build.onLoad({ filter: /[\\/]base64-js[\\/]index\.js$/ }, async ({ path }) => {
      const contents = (await readFile(path, "utf8")).replace(/^exports\.(\w+) = (\w+)$/gm, "export { $2 as $1 };");
      if (/\b(?:exports|module|require)\b/.test(contents)) throw new Error(`${path}: not the CommonJS expected`);
      return { contents, loader: "js" };
    });
  },
};

const shared: Options = {
  format: ["esm"],
  target: "es2022",
  // `await using` needs Symbol.asyncDispose in the consumer's types: pull in the lib that declares it, so a
  // project on target ES2022 with no `lib` setting compiles against our .d.ts (TypeScript >= 5.2).
  dts: { banner: '/// <reference lib="esnext.disposable" />' },
  sourcemap: true,
  clean: false,
  treeshake: true,
  external: ["msw", "undici"],
  // zod/mini and base64-js are bundled, zod tree-shaken to the checks we use. Loaded from node_modules, Node
  // compiles zod's whole module graph (its locales included) on a cold start, about 60 ms of a Lambda's init,
  // and loading base64-js (CommonJS) from an ES module costs about 1 ms more; the bundled files cost a few ms
  // in all. So the package has no runtime dependency, and a bundler needs no `mainFields` setting for it. An
  // app that also uses zod carries a second copy of those parts (about 6 KB gzipped).
  noExternal: [/^zod/, "base64-js"],
  esbuildPlugins: [base64AsModule],
  // Not minified: a user reads and steps through dist/ as written, an uncaught error echoes a short line,
  // and stack frames name real lines (src/ lines with `node --enable-source-maps`: the maps are shipped,
  // sources included). A bundler that minifies the app minifies this too (scripts/size.mjs measures that).
  // A cold import parses more bytes than a minified file would: bench section 6 measures it.
};

export default defineConfig([
  // Platform-neutral ESM: the same files load in Node, Deno, Bun, workerd and bundlers. The main entry is one
  // file with nothing split out: a cold import loads one module, not a chain of chunks.
  { ...shared, entry: { index: "src/index.ts" }, platform: "neutral", splitting: false },
  // The testing kit shares no file with the client. The msw handlers are an entry of their own, so the kit
  // loads without msw. The mock over real HTTP and its command (etcd-edge-mock) are Node-only entries built
  // here too, so they share the mock's chunk instead of copying it; only they import node: modules.
  {
    ...shared,
    entry: {
      testing: "src/testing/index.ts",
      "testing-msw": "src/testing/msw.ts",
      "testing-server": "src/testing/server/index.ts",
      "etcd-edge-mock": "src/testing/server/cli.ts",
    },
    external: [...(shared.external ?? []), /^node:/],
    platform: "neutral",
    splitting: true,
  },
  // OpenTelemetry from the client's diagnostics channels: @opentelemetry/api is the user's (an optional peer).
  {
    ...shared,
    entry: { otel: "src/otel/index.ts" },
    external: [...(shared.external ?? []), "@opentelemetry/api"],
    platform: "neutral",
    splitting: false,
  },
  // The operator's front door (inspect, revoke, request a release): kept out of the lock user's bundle.
  { ...shared, entry: { operate: "src/operate/index.ts" }, platform: "neutral", splitting: false },
  // Fences checked by the store that takes the write: no dependency, each store's helper tree-shaken apart.
  { ...shared, entry: { fence: "src/fence/index.ts" }, platform: "neutral", splitting: false },
  // Node-only speedups, behind their own entry so edge bundles never see them.
  { ...shared, entry: { node: "src/node/index.ts" }, platform: "node", splitting: false },
  // The operator's command (`npx etcd-edge locks …`): a program, not a module, so no types. Split, so that undici
  // (an optional peer) is loaded from its own chunk only when TLS files are given.
  {
    ...shared,
    entry: { "etcd-edge": "src/cli/main.ts" },
    platform: "node",
    splitting: true,
    dts: false,
    outDir: "dist/cli",
  },
]);
