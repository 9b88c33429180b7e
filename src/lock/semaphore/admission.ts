import type { EtcdClient } from "../../api/client.js";
import type { KeyValue, ResponseHeader } from "../../api/codec.js";
import { cmp, op } from "../../api/txn.js";
import { internal, permitsMismatch } from "../../errors/catalogue.js";
import { delay } from "../../gateway/signals.js";
import { contenders } from "../line/keys.js";
import { NEWEST_FIRST, OLDEST } from "../line/read.js";
import type { JoinCall, Standing, WaitContext } from "../line/standing.js";
import { afterStreamFailure, WAIT_IDLE_TIMEOUT } from "../line/wait.js";
import { untilAnswered } from "../resend/until-answered.js";

/**
 * Admission to a semaphore: join its line, count the keys ahead, wait until fewer than `permits` are.
 * semaphore.ts says why the wait is shaped this way.
 */

/** Where a contender stands: `ahead` counts the keys created before its own (holders, and waiters ahead of it). */
export interface Admission extends Standing {
  ahead: number;
}

/** The semaphore's line, as the requests need it. */
export interface PermitLine {
  name: string;
  prefix: string;
  key: string;
  permits: number;
}

/** The whole line, oldest first: each key ahead of a joiner is checked, since any of them may come to hold. */
const LINE = { sort: OLDEST.sort } as const;

/**
 * Joins the line in one transaction: put our key (its value is `permits`) if it does not exist yet, and read the
 * line whole. Every key in it must be a permit bound to a lease that agrees on `permits` (`checkLine`): a key
 * that no lease ends would take a permit for good. A resend after a lost answer finds our key and reads the same.
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

  async send(call: JoinCall): Promise<Admission> {
    const { prefix, key } = this.#line;
    const result = await this.#client
      .txn()
      .if(cmp.createRevision(key, "==", 0))
      .then(op.put(key, this.value, { lease: this.#leaseId }), op.get({ prefix, ...LINE }))
      .else(op.get(key), op.get({ prefix, ...LINE }))
      .commit(call);
    const [, line] = result.responses;
    const revision = result.succeeded ? result.header.revision : result.responses[0].kvs[0]?.createRevision;
    if (revision === undefined) throw internal(`key ${key} vanished inside one transaction`);
    checkLine(this.#line, line.kvs);
    const ahead = line.kvs.filter((kv) => kv.createRevision < revision).length;
    return { header: result.header, revision, present: true, ahead };
  }
}

/**
 * LOCK_NAME_CONFLICT unless every key is a permit bound to a lease (not a lock's key, data, another recipe's,
 * one a put cut loose), then PERMITS_MISMATCH unless every one agrees on `permits`.
 */
function checkLine(line: PermitLine, kvs: KeyValue[]): void {
  contenders("permit", line.prefix, kvs);
  const other = kvs.find((kv) => kv.value !== String(line.permits));
  if (other !== undefined) throw permitsMismatch(line.name, line.permits, other.key, other.value);
}

/** What a count of the keys ahead reads. */
interface CountRequest {
  client: EtcdClient;
  line: PermitLine;
  /** Our key's create revision. */
  revision: number;
  signal: AbortSignal;
  upTo?: number | undefined;
}

/**
 * One read: our key still there, and the keys older than it, listed and checked as the join checks them: etcd's
 * `count` ignores the create-revision filters, so it cannot count them. `upTo` caps the list when "at least that
 * many" is enough (a poll only asks whether fewer than `permits` are ahead); without it `ahead` is exact.
 */
async function countAhead({ client, line, revision, signal, upTo }: CountRequest): Promise<Admission> {
  const limit = upTo === undefined ? undefined : upTo + 1;
  const { prefix } = line;
  const query = { prefix, maxCreateRevision: revision, sort: NEWEST_FIRST, limit, signal } as const;
  const { header, kvs } = await client.range(query);
  checkLine(line, kvs);
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
  // Streams through this endpoint come back held back (a buffering proxy): the wait reads instead.
  const polls = () => context.mode === "poll" || client.transport.streamsHeldBack;
  for (;;) {
    if (!state.present) throw context.expired();
    if (state.ahead < line.permits) return state.header;
    if (polls()) await delay(context.pollInterval, context.signal);
    else {
      const admitted = await countDeletes(client, line, revision, state, context);
      if (admitted !== undefined) return admitted;
    }
    // Polling, or the count must be taken again (compaction, a stream held back): one read.
    const upTo = polls() ? line.permits : undefined;
    const request = { client, line, revision, signal: context.signal, upTo };
    state = await untilAnswered(countAhead.bind(undefined, request), context);
  }
}

/**
 * Follows the deletes under the line's prefix from just after `start`, each carrying the deleted key's
 * create revision (prevKv): one older than ours brings us one place forward. Resolves with the header that
 * admitted us, or undefined when the count must be read again (history compacted away, its stream held back
 * or broken: `afterStreamFailure`).
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
      /** The permit whose delete admitted us: with a lockDelay, held later if its holder left uncleanly. */
      let departed: KeyValue | undefined;
      for (const { kv, prevKv } of batch.events) {
        if (kv.key === line.key) throw context.expired();
        // etcd leaves prevKv out when the key's previous revision was compacted: count again.
        if (prevKv === undefined) return undefined;
        if (prevKv.createRevision >= revision) continue;
        older--;
        if (older < line.permits) departed ??= prevKv;
      }
      if (departed !== undefined) {
        await context.handover(departed);
        return batch.header;
      }
    }
  } catch (error) {
    await afterStreamFailure(error, context.signal);
  }
  return undefined;
}
