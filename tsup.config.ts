import { defineConfig, type Options } from "tsup";

const shared: Options = {
  format: ["esm"],
  target: "es2022",
  // `await using` needs Symbol.asyncDispose in the consumer's types: pull in the lib that declares it, so a
  // project on target ES2022 with no `lib` setting compiles against our .d.ts (TypeScript >= 5.2).
  dts: { banner: '/// <reference lib="esnext.disposable" />' },
  sourcemap: true,
  clean: false,
  treeshake: true,
  external: ["base64-js", "msw", "undici"],
  // zod/mini is bundled, tree-shaken to the checks we use: loaded from node_modules, Node compiles zod's whole
  // module graph (its locales included) on a cold start, about 60 ms of a Lambda's init, where the one bundled
  // file costs a few ms. An app that also uses zod carries a second copy of those parts (about 6 KB gzipped).
  noExternal: [/^zod/],
};

export default defineConfig([
  // Platform-neutral ESM: the same files load in Node, Deno, Bun, workerd and bundlers. The msw handlers are an
  // entry of their own, so the testing kit loads without msw. The mock over real HTTP and its command
  // (etcd-edge-mock) are Node-only entries built here too, so they share the mock's chunk instead of copying it;
  // only they import node: modules.
  {
    ...shared,
    entry: {
      index: "src/index.ts",
      testing: "src/testing/index.ts",
      "testing-msw": "src/testing/msw.ts",
      "testing-server": "src/testing/server/index.ts",
      "etcd-edge-mock": "src/testing/server/cli.ts",
    },
    external: [...(shared.external ?? []), /^node:/],
    platform: "neutral",
    splitting: true,
  },
  // Node-only speedups, behind their own entry so edge bundles never see them.
  { ...shared, entry: { node: "src/node/index.ts" }, platform: "node", splitting: false },
]);
