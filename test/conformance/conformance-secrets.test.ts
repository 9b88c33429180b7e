// No secret shows from a client with auth, its session or a lock it holds, however they are inspected,
// printed or serialised, nor from the errors and events they produce: the password, the auth tokens the
// client was given, a lock's ticket secret. (Errors that quote a secret, from a proxy that echoes the
// request: test/unit/secrets.test.ts.)
import { inspect, type InspectOptions } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import type { EtcdEvent, Fetch, Lock, Session } from "../../src/index.js";
import { rejection } from "../support/async.js";
import { useBackend } from "./backend.js";

/** Distinctive, with a quote and a backslash: JSON escapes it, so each form is looked for. */
const PASSWORD = 'Tenant-pw"Qx7\\Zr4';
const { backend } = useBackend({
  auth: { rootPassword: "root-pw", users: { tenant: { password: PASSWORD } } },
});

const INSPECTIONS: Array<InspectOptions | undefined> = [
  undefined,
  { getters: true },
  { showHidden: true },
  { getters: true, showHidden: true, depth: Number.POSITIVE_INFINITY },
];

/** Everything `value` shows: inspected every way, printed, and serialised (where that does not throw). */
function shown(value: unknown): string {
  const parts = INSPECTIONS.map((options) => inspect(value, options));
  parts.push(String(value));
  parts.push(JSON.stringify(value) ?? "");
  return parts.join("\n");
}

describe("a client with auth, a session and a lock", () => {
  const tokens = new Set<string>();
  const events: EtcdEvent[] = [];
  let session: Session | undefined;
  afterAll(async () => {
    await session?.close().catch(() => {});
  });

  /** A fetch that notes every auth token the client sends. */
  const noting: Fetch = (input, init) => {
    const token = init.headers.authorization;
    if (token !== undefined) tokens.add(token);
    return backend.fetch(input, init);
  };

  it("show neither the password, nor a token, nor the lock's ticket secret (old: inspect with getters)", async () => {
    const etcd = backend.client({
      auth: { username: "tenant", password: PASSWORD },
      fetch: noting,
      onEvent: (event) => events.push(event),
    });
    await etcd.put("secrets/k", "v");
    session = await etcd.session({ ttl: 30 });
    const lock: Lock<Session> = await session.mutex("secrets/lock").lock();
    expect(tokens.size).toBeGreaterThan(0);
    const secrets = [PASSWORD, JSON.stringify(PASSWORD).slice(1, -1), ...tokens];
    // The ticket carries the secret on purpose (`etcd.resumeLock` takes it); the lock's own JSON does not.
    const ticketSecret = lock.ticket().secret;

    const everything = [shown(etcd), shown(etcd.config), shown(session), shown(lock), JSON.stringify(events)].join(
      "\n",
    );
    for (const secret of [...secrets, ticketSecret]) expect(everything).not.toContain(secret);
    for (const secret of [...secrets, ticketSecret]) expect(JSON.stringify(lock)).not.toContain(secret);
    // What is shown is the redaction, not nothing: the username is there, the password reads [redacted].
    expect(inspect(etcd.transport, { getters: true, showHidden: true })).toContain("[redacted]");
    await lock.unlock();
  });

  it("a refused sign-in shows neither the wrong password nor the right one", async () => {
    const wrong = `${PASSWORD}-wrong`;
    const etcd = backend.client({ auth: { username: "tenant", password: wrong }, retries: 0 });
    const error = await rejection(etcd.get("secrets/k"));
    expect(error.code).toBe("UNAUTHENTICATED");
    const text = shown(error);
    for (const secret of [wrong, JSON.stringify(wrong).slice(1, -1), PASSWORD]) expect(text).not.toContain(secret);
  });
});
