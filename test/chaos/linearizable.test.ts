// The porcupine check reads the workers' events as a register's history, and porcupine (built with the Go-built
// members) tells a linearizable history from one that is not: a check that cannot fail would mean nothing.
import { describe, expect, it } from "vitest";
import type { RunRecord } from "./checks.ts";
import type { WorkerEvent } from "./events.ts";
import { checkRegister, counterHistory, type RegisterOp } from "./linearizable.ts";

const T0 = 1_000_000;
const MUTEX = { mode: "auto", wait: "watch", fetch: "global" } as const;

/** One fenced increment from `value - 1` to `value`: the get, the txn, and how the commit ended. */
function round(id: string, at: number, value: number, ending: WorkerEvent | undefined): WorkerEvent[] {
  const attempt = `${id}.${value}`;
  return [
    { ev: "call", op: "get", t0: at, t: at + 2, budget: 5_000, ok: true },
    { ev: "commit-sent", t: at + 3, attempt, token: 10, logKey: `log/${attempt}`, value },
    ...(ending === undefined
      ? []
      : [
          { ev: "call", op: "txn", t0: at + 4, t: at + 6, budget: 5_000, ok: ending.ev === "commit" } as WorkerEvent,
          ending,
        ]),
  ];
}

const commit = (attempt: string, outcome: "ok" | "refused" | "error", ownKeyHeld?: boolean): WorkerEvent => ({
  ev: "commit",
  t: 0,
  attempt,
  outcome,
  ownKeyHeld,
});

function record(workers: WorkerEvent[][], landed: string[]): RunRecord {
  return {
    workers: workers.map((events, i) => ({
      id: `w${i}`,
      kind: MUTEX,
      events,
      leases: [],
      stops: [],
      hungAtEnd: false,
    })),
    logs: landed.map((attempt) => ({ key: `log/${attempt}`, modRevision: 0, token: 10, value: 0, attempt })),
  } as unknown as RunRecord;
}

describe("the counter's history", () => {
  it("reads and landed writes as timed; a refusal only when held; an unanswered write if it landed", () => {
    const ops = counterHistory(
      record(
        [
          [
            ...round("w0", T0, 1, commit("w0.1", "ok")),
            ...round("w0", T0 + 10, 2, commit("w0.2", "refused", false)),
            ...round("w0", T0 + 20, 2, commit("w0.2", "refused", true)),
          ],
          [...round("w1", T0 + 30, 2, commit("w1.2", "error")), ...round("w1", T0 + 40, 3, undefined)],
        ],
        ["w0.1", "w1.2", "w1.3"],
      ),
    );
    const µs = (ms: number) => ms * 1_000;
    const end = µs(T0 + 43) + 1;
    expect(ops).toEqual([
      { client: 0, kind: "read", value: 0, call: µs(T0), return: µs(T0 + 2) },
      { client: 0, kind: "cas", from: 0, to: 1, ok: true, call: µs(T0 + 4), return: µs(T0 + 6) },
      { client: 0, kind: "read", value: 1, call: µs(T0 + 10), return: µs(T0 + 12) },
      { client: 0, kind: "read", value: 1, call: µs(T0 + 20), return: µs(T0 + 22) },
      { client: 0, kind: "cas", from: 1, to: 2, ok: false, call: µs(T0 + 24), return: µs(T0 + 26) },
      { client: 1, kind: "read", value: 1, call: µs(T0 + 30), return: µs(T0 + 32) },
      { client: 1, kind: "read", value: 2, call: µs(T0 + 40), return: µs(T0 + 42) },
      { client: 1, kind: "cas", from: 1, to: 2, ok: true, call: µs(T0 + 34), return: end },
      { client: 1, kind: "cas", from: 2, to: 3, ok: true, call: µs(T0 + 43), return: end },
    ]);
  });
});

describe("porcupine on a counter's history", () => {
  const read = (client: number, value: number, call: number): RegisterOp => ({
    client,
    kind: "read",
    value,
    call,
    return: call + 2,
  });
  const cas = (client: number, from: number, ok: boolean, call: number, ret = call + 2): RegisterOp => ({
    client,
    kind: "cas",
    from,
    to: from + 1,
    ok,
    call,
    return: ret,
  });
  const viz = "/dev/null";

  it("takes increments in turn, overlapping calls, and a write whose answer never came", () => {
    const ops = [
      read(0, 0, 0),
      cas(0, 0, true, 3),
      read(1, 1, 6),
      // Overlaps the read beside it: either order fits.
      cas(1, 1, true, 9, 20),
      read(2, 1, 10),
      read(0, 2, 21),
      cas(0, 2, true, 24, 1_000),
      read(2, 2, 25),
    ];
    expect(checkRegister(ops, viz).result).toBe("Ok");
  });

  it("refuses a write said to have landed that a later read does not see", () => {
    const ops = [read(0, 0, 0), cas(0, 0, true, 3), read(1, 0, 10)];
    expect(checkRegister(ops, viz).result).toBe("Illegal");
  });

  it("refuses a stale read, and a refusal while held that saw the value it expected", () => {
    expect(checkRegister([cas(0, 0, true, 0), cas(1, 1, true, 5), read(2, 1, 10)], viz).result).toBe("Illegal");
    expect(checkRegister([read(0, 0, 0), cas(0, 0, false, 3)], viz).result).toBe("Illegal");
  });
});
