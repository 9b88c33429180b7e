// `<runtime> failures.mjs <endpoints as JSON>`: one put per named endpoint, each expected to fail. Prints one
// JSON line: per name, the error's code, message and `indeterminate`. Runs in Node, Deno and Bun alike.
import { Etcd } from "etcd-edge";

const args = globalThis.Deno?.args ?? globalThis.process?.argv?.slice(2) ?? [];
const report = {};
for (const [name, url] of Object.entries(JSON.parse(args[0]))) {
  try {
    await new Etcd({ endpoints: [url], retries: 0, timeout: 5_000 }).put("k", "v");
    report[name] = { code: "none" };
  } catch (error) {
    report[name] = { code: error.code, message: error.message, indeterminate: error.indeterminate };
  }
}
console.log(JSON.stringify(report));
