import type { EtcdClient } from "../../api/client.js";
import type { KeyValue, ResponseHeader } from "../../api/codec.js";
import { cmp, op } from "../../api/txn.js";
import { internal, permitsMismatch } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { delay } from "../../gateway/signals.js";
import type { JoinCall, Standing, WaitContext } from "../line/standing.js";
import { contenders } from "../line/keys.js";
import { NEWEST_FIRST, OLDEST, untilAnswered } from "../line/read.js";
import { WAIT_IDLE_TIMEOUT } from "../line/wait.js";

/**
 * Admission to a semaphore: join its line, count the keys ahead, wait until fewer than `permits` are.
 * semaphore.ts says why the wait is shaped this way.
 */

/**
 * Where a contender stands: `ahead` counts the keys created before its own (holders, and waiters ahead of it);
 * after the join, `oldest` is the line's oldest key (ours when alone), to check the line agrees on `permits`.
 */
export interface Admission extends Standing {
  ahead: number;
  oldest?: KeyValue | undefined;
}

/** The semaphore's line, as the requests need it. */
export interface PermitLine {
  name: string;
  prefix: string;
  key: string;
  permits: number;
}

/**
 * Joins the line in one transaction: put our key (its value is `permits`) if it does not exist yet, and read
 * the oldest key and how many keys the line holds (ours being the newest, the others are all ahead). A resend
 * after a lost answer finds our key and needs one more read to count the keys ahead of it.
 */
export class PermitJoin {
  readonly #client: EtcdClient;
  readonly #line: PermitLine;
  readonly #leaseId: string;
  readonly value: string;

  constructor(client: EtcdClient, line: PermitLine, leaseId: string) {
    this.#client = client;
    this.#line = line;
    this.#leaseId = leaseId;
    this.value = String(line.permits);
  }

  send(call: JoinCall): Promise<Admission> {
    return joinPermits(this.#client, this.#line, this.#leaseId, call);
  }
}

async function joinPermits(client: EtcdClient, line: PermitLine, leaseId: string, call: JoinCall): Promise<Admission> {
  const { prefix, key } = line;
  const result = await client
    .txn()
    .if(cmp.createRevision(key, "==", 0))
    .then(
      op.put(key, String(line.permits), { lease: leaseId }),
      op.get({ prefix, ...OLDEST }),
      op.get({ prefix, countOnly: true }),
    )
    .else(op.get(key), op.get({ prefix, ...OLDEST }))
    .commit(call);
  if (result.succeeded) {
    const [, oldest, all] = result.responses;
    const revision = result.header.revision;
    return { header: result.header, revision, present: true, ahead: all.count - 1, oldest: oldest.kvs[0] };
  }
  const [own, oldest] = result.responses;
  const mine = own.kvs[0];
  if (mine === undefined) throw internal(`key ${key} vanished inside one transaction`);
  const state = await countAhead({ client, prefix, revision: mine.createRevision, signal: call.signal });
  return { ...state, oldest: oldest.kvs[0] };
}

/**
 * LOCK_NAME_CONFLICT unless the oldest key is a permit (a lock's key, data, another recipe's), PERMITS_MISMATCH
 * unless it agrees on `permits`. Checking the oldest is enough: every key in the line was checked against the
 * oldest of its time when it joined, and that one against the oldest before it; the keys ahead are checked
 * as permits each time they are counted.
 */
export function checkPermits(line: PermitLine, oldest: KeyValue | undefined): void {
  if (oldest === undefined || oldest.key === line.key) return;
  contenders("permit", line.prefix, false, [oldest]);
  if (oldest.value !== String(line.permits)) throw permitsMismatch(line.name, line.permits, oldest.key, oldest.value);
}

/** What a count of the keys ahead reads. */
interface CountRequest {
  client: EtcdClient;
  prefix: string;
  /** Our key's create revision. */
  revision: number;
  signal: AbortSignal;
  upTo?: number | undefined;
}

/**
 * One read: our key still there, and how many keys are older, listed (keys only): etcd's `count` ignores the
 * create-revision filters, so it cannot count them. `upTo` caps the list when "at least that many" is enough
 * (a poll only asks whether fewer than `permits` are ahead); without it `ahead` is exact.
 */
export async function countAhead({ client, prefix, revision, signal, upTo }: CountRequest): Promise<Admission> {
  const limit = upTo === undefined ? undefined : upTo + 1;
  const { header, kvs } = await client.range({
    prefix,
    maxCreateRevision: revision,
    sort: NEWEST_FIRST,
    limit,
    keysOnly: true,
    signal,
  });
  contenders("permit", prefix, true, kvs);
  const present = kvs[0]?.createRevision === revision;
  return { header, revision, present, ahead: present ? kvs.length - 1 : kvs.length };
}

/**
 * Waits until fewer than `permits` keys are older than ours; returns the header that showed it. Throws
 * SESSION_EXPIRED (via `expired`) when our own key goes meanwhile.
 */
export async function waitForPermit(
  client: EtcdClient,
  line: PermitLine,
  revision: number,
  start: Admission,
  context: WaitContext,
): Promise<ResponseHeader> {
  let state = start;
  for (;;) {
    if (!state.present) throw context.expired();
    if (state.ahead < line.permits) return state.header;
    if (context.mode === "poll") await delay(context.pollInterval, context.signal);
    else {
      const admitted = await countDeletes(client, line, revision, state, context);
      if (admitted !== undefined) return admitted;
    }
    // Polling, or the count must be taken again (compaction): one read.
    const upTo = context.mode === "poll" ? line.permits : undefined;
    const request = { client, prefix: line.prefix, revision, signal: context.signal, upTo };
    state = await untilAnswered(countAhead, request, context);
  }
}

/**
 * Follows the deletes under the line's prefix from just after `start`, each carrying the deleted key's
 * create revision (prevKv): one older than ours brings us one place forward. Resolves with the header that
 * admitted us, or undefined when the count must be read again (history compacted away).
 */
async function countDeletes(
  client: EtcdClient,
  line: PermitLine,
  revision: number,
  start: Admission,
  context: WaitContext,
): Promise<ResponseHeader | undefined> {
  let older = start.ahead;
  try {
    const deletes = client.watch({
      prefix: line.prefix,
      startRevision: start.header.revision + 1,
      noPut: true,
      prevKv: true,
      idleTimeout: WAIT_IDLE_TIMEOUT,
      signal: context.signal,
    });
    for await (const batch of deletes) {
      for (const { kv, prevKv } of batch.events) {
        if (kv.key === line.key) throw context.expired();
        // etcd leaves prevKv out when the key's previous revision was compacted: count again.
        if (prevKv === undefined) return undefined;
        if (prevKv.createRevision < revision) older--;
      }
      if (older < line.permits) return batch.header;
    }
  } catch (error) {
    if (!isEtcdError(error, "COMPACTED") || context.signal.aborted) throw error;
  }
  return undefined;
}
