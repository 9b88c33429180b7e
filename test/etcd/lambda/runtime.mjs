// A stand-in for the AWS Lambda Node.js runtime, for one sandbox: it loads the handler module once (the
// cold start), then serves invocations one at a time, reusing that module instance, as Lambda does for
// warm invocations. The test freezes and thaws this process with SIGSTOP/SIGCONT, as Lambda freezes an
// idle (or stalled) sandbox.
//
//   node test/etcd/lambda/runtime.mjs [handler.mjs]       (default: examples/lambda/handler.mjs)
//
// stdin, one JSON object a line:  { "id": 1, "event": {...}, "timeoutMs": 15000 }
// stdout, one JSON object a line:
//   { "type": "ready", "pid", "handlerLoads" }                       after the module loaded
//   { "type": "log", "id", "level", "message" }                      the handler's console output
//   { "type": "result", "id", "result", "meta" }                     the handler resolved
//   { "type": "error", "id", "error": { "name", "message" }, "meta" } it threw (or the invocation timed out)
// meta: { pid, handlerLoads, invocation, coldStart } — handlerLoads counts how many times the handler
// module was evaluated in this process (a load hook sees every evaluation), so it must stay 1.
//
// As on Lambda, an invocation that outlives its timeout ends the sandbox: the runtime reports it and exits.
import { registerHooks } from "node:module";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { format } from "node:util";

const here = fileURLToPath(new URL(".", import.meta.url));
const handlerUrl = pathToFileURL(
  resolve(process.argv[2] ?? resolve(here, "../../../examples/lambda/handler.mjs")),
).href;

let handlerLoads = 0;
registerHooks({
  load(url, context, nextLoad) {
    if (url === handlerUrl) handlerLoads++;
    return nextLoad(url, context);
  },
});

// stdout belongs to the protocol; everything the handler prints becomes a "log" message of the invocation.
const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
let current; // id of the invocation in progress
for (const level of ["log", "info", "warn", "error", "debug"]) {
  console[level] = (...args) => send({ type: "log", id: current, level, message: format(...args) });
}

const { handler } = await import(handlerUrl);
if (typeof handler !== "function") throw new Error(`${handlerUrl} exports no handler function`);
send({ type: "ready", pid: process.pid, handlerLoads });

let invocation = 0;

async function invoke({ id, event, timeoutMs = 15_000 }) {
  invocation++;
  current = id;
  const meta = { pid: process.pid, handlerLoads, invocation, coldStart: invocation === 1 };
  // Lambda's deadline is wall-clock time, so time spent frozen counts against it.
  const deadline = Date.now() + timeoutMs;
  const context = {
    awsRequestId: `req-${id}`,
    functionName: "etcd-edge-lambda-example",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  let timer;
  const timedOut = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`Task timed out after ${timeoutMs} ms`), { name: "Sandbox.Timedout" })),
      timeoutMs,
    );
  });
  try {
    const result = await Promise.race([Promise.resolve().then(() => handler(event, context)), timedOut]);
    send({ type: "result", id, result: result ?? null, meta });
  } catch (error) {
    send({
      type: "error",
      id,
      error: { name: error?.name ?? "Error", message: error?.message ?? String(error) },
      meta,
    });
    if (error?.name === "Sandbox.Timedout") process.exit(1);
  } finally {
    clearTimeout(timer);
    current = undefined;
  }
}

// One invocation at a time: requests that arrive meanwhile wait their turn, as Lambda never runs two in a sandbox.
let queue = Promise.resolve();
const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line.trim() === "") return;
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    send({ type: "error", id: null, error: { name: "SyntaxError", message: `not JSON: ${line}` } });
    return;
  }
  queue = queue.then(() => invoke(request));
});
// The test closing stdin ends the sandbox once the invocation in progress is done.
lines.on("close", () => void queue.then(() => process.exit(0)));
