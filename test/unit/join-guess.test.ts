// When a mutex sends the put alone before the full join (line/join.ts, JoinHistory): the put alone saves the busy
// branch's cost in etcd when the line is empty and costs a round trip when it is not, so a mutex guesses an empty
// line at first, stops at the first join that finds someone there, and guesses again once two joins in a row found
// the line empty. Other recipes always send the full join. On the mock, counting each join's shape.
import { describe, expect, it } from "vitest";
import type { Lock } from "../../src/index.js";
import { sleep } from "../support/async.js";
import { mockClient, type Through } from "../support/mock.js";

type Shape = "alone" | "full";

/** Records the shape of each join sent: the put alone, or the full join with its busy branch. */
function joinShapes(): { through: Through; shapes: Shape[] } {
  const shapes: Shape[] = [];
  const through: Through = (input, init, forward) => {
    if (input.endsWith("/v3/kv/txn") && init.body.includes("request_put")) {
      const txn = JSON.parse(init.body) as { failure?: unknown[] };
      shapes.push((txn.failure ?? []).length > 0 ? "full" : "alone");
    }
    return forward(input, init);
  };
  return { through, shapes };
}

describe("a mutex's joins", () => {
  it("guess an empty line at first, stop at a busy one, and guess again after two empty ones in a row", async () => {
    const { through, shapes } = joinShapes();
    const { etcd } = mockClient({}, { through });
    const other = (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs");
    const mutex = (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs");
    const joins = async (lock: () => Promise<Lock>) => {
      const from = shapes.length;
      await (await lock()).unlock();
      return shapes.slice(from);
    };
    // Free: the guess is right.
    expect(await joins(() => mutex.lock())).toEqual(["alone"]);
    // Busy: the guess is refused, then the full join (a try, which holds at once or not at all, is not one).
    const holder = await other.lock();
    const waiting = mutex.lock();
    await sleep(50);
    expect(shapes.slice(-2)).toEqual(["alone", "full"]);
    await holder.unlock();
    await (await waiting).unlock();
    // It found someone there: no guess, until two full joins in a row found the line empty.
    expect(await joins(() => mutex.lock())).toEqual(["full"]);
    expect(await joins(() => mutex.lock())).toEqual(["full"]);
    expect(await joins(() => mutex.lock())).toEqual(["alone"]);
    expect(await joins(() => mutex.lock())).toEqual(["alone"]);
  });

  it("count a refused guess as a busy line even when the full join after it finds the line empty", async () => {
    const { through: shape, shapes } = joinShapes();
    let release: (() => Promise<unknown>) | undefined;
    // The holder leaves between the refused guess and the full join.
    const through: Through = async (input, init, forward) => {
      const answer = await shape(input, init, forward);
      if (shapes.at(-1) === "alone" && release !== undefined) await release();
      return answer;
    };
    const { etcd, mock } = mockClient({}, { through });
    // On a client of its own: a release sent from inside this client's join would wait behind it.
    const other = mockClient({}, { mock }).etcd;
    const holder = await (await other.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    const mutex = (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs");
    release = () => holder.unlock();
    const from = shapes.length;
    const lock = await mutex.lock();
    release = undefined;
    expect(shapes.slice(from)).toEqual(["alone", "full"]);
    await lock.unlock();
    await (await mutex.lock()).unlock();
    expect(shapes.slice(from + 2)).toEqual(["full"]);
  });

  it("of another recipe never guess: an election's campaign sends the full join into an empty line", async () => {
    const { through, shapes } = joinShapes();
    const { etcd } = mockClient({}, { through });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const election = session.election("jobs");
    await election.campaign("me");
    expect(shapes).toEqual(["full"]);
    await election.resign();
  });
});
