// Fences where the data lives (issue 39), shown with a control that loses updates without them, in the lock-set
// style of Jepsen: worker processes increment one counter under one lock, on the built package and a real etcd.
// One holder (the victim) reads the counter and is frozen (SIGSTOP) past its 2 s lease; the others take the lock
// and increment; the victim resumes and writes what it read plus one, as a holder that still believes it holds.
// Without a fence the store ends behind the increments acknowledged (the control must show it, or it tests
// nothing); with etcd-edge/fence it ends exact, and the victim's write is refused with LOCK_LOST.
// Each store runs here for real, or as the closest stand-in (test/support/stores.ts): Postgres, SQLite
// (node:sqlite), D1 and R2 (Miniflare, i.e. workerd), S3 and DynamoDB (moto, an emulator). The control itself
// (control.ts) also runs all through `npm run chaos`, with etcd behind faults.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sharedEndpoint, uniqueName } from "../support/etcd.js";
import { control, STORES, type StoreName, type Stores, startStores } from "./control.ts";

/** Two workers after the victim, each this many increments: the updates a lost write hides. */
const WORKERS = 2;
const INCREMENTS = 4;

let stores: Stores;
beforeAll(async () => {
  stores = await startStores();
}, 120_000);
afterAll(async () => {
  await stores?.stop();
});

const round = (store: StoreName, fenced: boolean) =>
  control({
    store,
    conn: stores.conns[store],
    fenced,
    endpoints: [sharedEndpoint()],
    name: uniqueName(`fence-${store}`),
    workers: WORKERS,
    increments: INCREMENTS,
  });

describe.each(STORES)("%s", (store) => {
  it("without a fence, the frozen holder's write lands after the others': updates are lost", async () => {
    const result = await round(store, false);
    expect(result.read).toBe(0);
    expect(result.victim.event).toBe("wrote");
    expect(result.incremented).toBe(WORKERS * INCREMENTS);
    // The victim wrote 1 over the others' increments: all of them lost.
    expect(result.final).toBe(1);
    expect(result.lost).toBe(WORKERS * INCREMENTS);
  });

  it("with etcd-edge/fence, the store refuses it (LOCK_LOST) and ends exact", async () => {
    const result = await round(store, true);
    expect(result.victim).toMatchObject({ event: "refused", code: "LOCK_LOST" });
    expect(result.victim.message).toMatch(/fenced with token \d+ was refused/);
    expect(result.incremented).toBe(WORKERS * INCREMENTS);
    expect(result.final).toBe(WORKERS * INCREMENTS);
    expect(result.lost).toBe(0);
  });
});
