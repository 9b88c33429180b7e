// The fault relay does what each mode says: against a tiny local HTTP server (which counts what reaches it)
// with keep-alive connections, then against a real etcd member through the SDK.
import { type IncomingMessage, Agent, createServer, request, type Server, type ServerResponse } from "node:http";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Etcd, op } from "../../src/index.js";
import { sleep, stillPending, until, within } from "../support/async.js";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { type EtcdMember, startEtcd } from "../etcd/harness.ts";

/** Requests that reached the server, by path, and the open streaming answers. */
let reached: string[] = [];
let server: Server;
let origin: string;

function handle(req: IncomingMessage, res: ServerResponse): void {
  reached.push(req.url ?? "");
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString();
    if (req.url === "/chunked") {
      // No length: Node answers chunked.
      res.write("part1,");
      res.end(`part2:${body}`);
    } else if (req.url === "/stream") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("tick\n");
      const timer = setInterval(() => res.write("tick\n"), 20);
      res.on("close", () => clearInterval(timer));
    } else {
      const text = `echo:${req.url}:${body}`;
      res.writeHead(200, { "content-length": Buffer.byteLength(text) });
      res.end(text);
    }
  });
}

let proxy: FaultProxy;
let agent: Agent;

/** One request through the proxy on the shared keep-alive connection; resolves with the body. */
function send(path: string, body = "", options: { chunkedBody?: boolean; via?: Agent } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = options.chunkedBody
      ? {}
      : { "content-length": String(Buffer.byteLength(body)) };
    const req = request(`${proxy.url}${path}`, { method: "POST", agent: options.via ?? agent, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve(text));
      res.on("error", reject);
    });
    req.on("error", reject);
    if (options.chunkedBody) {
      req.write(body.slice(0, 3));
      req.write(body.slice(3));
    } else req.write(body);
    req.end();
  });
}

/** A streaming request whose received text can be read as it grows; `stop()` aborts it. */
function openStream(via: Agent = agent) {
  const state = { text: "", error: undefined as NodeJS.ErrnoException | undefined, ended: false };
  const req = request(
    `${proxy.url}/stream`,
    { method: "POST", agent: via, headers: { "content-length": "0" } },
    (res) => {
      res.setEncoding("utf8");
      res.on("data", (c: string) => (state.text += c));
      res.on("end", () => (state.ended = true));
      res.on("error", (e) => (state.error ??= e));
    },
  );
  req.on("error", (e) => (state.error ??= e));
  req.end();
  return Object.assign(state, { stop: () => req.destroy() });
}

const rejectionCode = (promise: Promise<unknown>) =>
  promise.then(
    () => "resolved",
    (error: NodeJS.ErrnoException) => error.code ?? error.message,
  );

beforeAll(async () => {
  server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  origin = `http://127.0.0.1:${address.port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(async () => {
  reached = [];
  proxy = await startFaultProxy(origin);
  // One socket, kept alive: consecutive requests share a connection, as a client's pool does.
  agent = new Agent({ keepAlive: true, maxSockets: 1 });
});

afterEach(async () => {
  agent.destroy();
  await proxy.close();
});

describe("fault proxy against a local HTTP server", () => {
  it("passes keep-alive requests and answers of every framing through unchanged, on one connection", async () => {
    expect(await send("/a", "x")).toBe("echo:/a:x");
    expect(await send("/chunked", "body", { chunkedBody: true })).toBe("part1,part2:body");
    expect(await send("/b", "y".repeat(100_000))).toBe(`echo:/b:${"y".repeat(100_000)}`);
    expect(proxy.stats().accepted).toBe(1);
    expect(reached).toEqual(["/a", "/chunked", "/b"]);
  });

  it("reset() sends RST on every open connection, streams included, and still accepts new ones", async () => {
    const stream = openStream(new Agent());
    await until("stream ticks", 2_000, () => stream.text.includes("tick"));
    await send("/a");
    expect(proxy.connections()).toBe(2);
    expect(proxy.reset()).toBe(2);
    await until("stream error", 2_000, () => stream.error);
    expect(stream.error!.code).toBe("ECONNRESET");
    expect(await send("/again")).toBe("echo:/again:");
  });

  it("silence() holds bytes both ways with connections open, and resume() delivers them", async () => {
    const stream = openStream(new Agent());
    await until("stream ticks", 2_000, () => stream.text.includes("tick"));
    proxy.silence();
    await sleep(50);
    const before = stream.text.length;
    const pending = send("/held", "h");
    expect(await stillPending(pending, 300)).toBe(true);
    expect(reached).not.toContain("/held");
    expect(stream.text.length).toBe(before);
    expect(stream.error).toBeUndefined();
    proxy.resume();
    expect(await pending).toBe("echo:/held:h");
    await until("stream resumes", 2_000, () => stream.text.length > before);
    stream.stop();
  });

  it("silence({ drop: true }) leaves open connections dead for good, but new ones after resume() work", async () => {
    const stream = openStream(new Agent());
    await until("stream ticks", 2_000, () => stream.text.includes("tick"));
    proxy.silence({ drop: true });
    await sleep(50);
    const before = stream.text.length;
    const duringSilence = send("/during");
    await until("the new connection is accepted", 2_000, () => proxy.connections() === 2);
    await sleep(50);
    proxy.resume();
    // Still nothing on the old stream, no error either: a half-open connection, as after a NAT drop.
    expect(await stillPending(duringSilence, 300)).toBe(true);
    expect(stream.text.length).toBe(before);
    expect(stream.error).toBeUndefined();
    expect(stream.ended).toBe(false);
    expect(reached).not.toContain("/during");
    expect(await send("/after", "", { via: new Agent() })).toBe("echo:/after:");
    stream.stop();
  });

  it("silence({ ms }) resumes by itself", async () => {
    proxy.silence({ ms: 200 });
    const started = performance.now();
    expect(await send("/late")).toBe("echo:/late:");
    expect(performance.now() - started).toBeGreaterThanOrEqual(150);
  });

  it(
    "swallowNext({ path }) eats only the matching request: " + "never forwarded, its connection open and silent",
    async () => {
      const hit = proxy.swallowNext({ path: "/target" });
      expect(await send("/other", "1")).toBe("echo:/other:1");
      const swallowed = send("/target", "2", { chunkedBody: true });
      expect(await hit).toMatchObject({ method: "POST", path: "/target" });
      expect(await stillPending(swallowed, 300)).toBe(true);
      expect(reached).toEqual(["/other"]);
      expect(proxy.connections()).toBe(1);
      expect(proxy.stats().swallowed).toBe(1);
      // One shot: the next matching request on a fresh connection goes through.
      expect(await send("/target", "3", { via: new Agent() })).toBe("echo:/target:3");
    },
  );

  it(
    "dropNextAnswer({ path }) forwards the request, " + 'then drops its answer and resets the client ("close")',
    async () => {
      const hit = proxy.dropNextAnswer({ path: "/apply" });
      expect(await send("/first")).toBe("echo:/first:");
      expect(await rejectionCode(send("/apply", "v"))).toBe("ECONNRESET");
      expect(await hit).toMatchObject({ path: "/apply" });
      expect(reached).toEqual(["/first", "/apply"]);
      expect(proxy.stats().answersDropped).toBe(1);
    },
  );

  it(
    "dropNextAnswer({ then: " + '"silence" }) applies the request and leaves the client waiting on an open connection',
    async () => {
      const hit = proxy.dropNextAnswer({ path: "/apply", then: "silence" });
      const lost = send("/apply", "v");
      expect(await hit).toMatchObject({ path: "/apply" });
      expect(await stillPending(lost, 300)).toBe(true);
      expect(reached).toEqual(["/apply"]);
      expect(proxy.connections()).toBe(1);
    },
  );

  it("an armed fault that nothing matches disarms itself after `within`, and disarm() cancels at once", async () => {
    expect(await proxy.swallowNext({ path: "/never", within: 100 })).toBeUndefined();
    const armed = proxy.dropNextAnswer({ path: "/never" });
    proxy.disarm();
    expect(await armed).toBeUndefined();
    expect(await send("/never")).toBe("echo:/never:");
  });

  it("setLatency(ms) delays each direction by ms", async () => {
    proxy.setLatency(150);
    const started = performance.now();
    expect(await send("/slow")).toBe("echo:/slow:");
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    proxy.setLatency(0);
  });

  it(
    "refuse() makes new connections fail like a dead member's port; " + "accept() listens again on the same URL",
    async () => {
      expect(await send("/open")).toBe("echo:/open:");
      // At once, though a connection is open; and that connection keeps working (the member is not dead yet).
      await within(500, "refuse()", proxy.refuse());
      expect(await send("/still")).toBe("echo:/still:");
      expect(await rejectionCode(send("/x", "", { via: new Agent() }))).toBe("ECONNREFUSED");
      await proxy.accept();
      expect(await send("/x", "", { via: new Agent() })).toBe("echo:/x:");
    },
  );
});

describe("fault proxy in front of a real etcd member", () => {
  let member: EtcdMember;
  let relay: FaultProxy;
  let etcd: Etcd;
  let direct: Etcd;

  beforeAll(async () => {
    member = await startEtcd();
    relay = await startFaultProxy(member.clientUrl);
    etcd = new Etcd({ endpoints: relay.url, timeout: 1_500, retries: 0 });
    direct = new Etcd({ endpoints: member.clientUrl });
  });

  afterAll(async () => {
    await relay.close();
    await member.stop();
  });

  it("a dropped txn answer: the SDK's call fails, yet etcd applied the write", async () => {
    const key = `fault-proxy/applied-${Date.now()}`;
    const hit = relay.dropNextAnswer({ path: "/v3/kv/txn" });
    // Not a txn: the armed fault lets it by.
    await etcd.put(`${key}-before`, "p");
    await expect(etcd.txn().then(op.put(key, "x")).commit()).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(await hit).toMatchObject({ method: "POST", path: "/v3/kv/txn" });
    expect((await direct.get(key))?.value).toBe("x");
    expect((await direct.get(`${key}-before`))?.value).toBe("p");
  });

  it("a swallowed put never reaches etcd and the SDK's call times out", async () => {
    const key = `fault-proxy/swallowed-${Date.now()}`;
    const hit = relay.swallowNext({ path: "/v3/kv/put" });
    await expect(etcd.put(key, "v")).rejects.toMatchObject({ code: "TIMEOUT" });
    expect(await hit).toBeDefined();
    expect(await direct.get(key)).toBeUndefined();
  });

  it("watch events flow through; silence holds them and resume delivers them", async () => {
    const key = `fault-proxy/watched-${Date.now()}`;
    const controller = new AbortController();
    const seen: string[] = [];
    const watching = (async () => {
      for await (const batch of etcd.watch({ key, signal: controller.signal })) {
        for (const event of batch.events) seen.push(event.kv.value);
      }
    })().catch(() => {});
    await sleep(300);
    await direct.put(key, "1");
    await until("first event", 3_000, () => seen.includes("1"));
    relay.silence();
    await direct.put(key, "2");
    await sleep(300);
    expect(seen).toEqual(["1"]);
    relay.resume();
    await until("held event", 3_000, () => seen.includes("2"));
    controller.abort();
    await watching;
  });
});
