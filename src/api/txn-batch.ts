import { aborted, badField } from "../errors/catalogue.js";
import { unanswered } from "../errors/etcd-error.js";
import { resolveSignal, resolveTimeout } from "../gateway/config.js";
import type { CallOptions, Transport } from "../gateway/transport.js";
import { untilAborted } from "../gateway/signals.js";
import type * as wire from "../gateway/wire.js";
import { txnCall } from "./txn.js";

/**
 * Sends the transactions that many callers of one client start in the same turn of the event loop (a lock's
 * join, a lock's release: each on its own name) as one request: one transaction holding each of them as a
 * nested transaction. Go's `concurrency` sends one request per lock; through the gateway every request costs
 * the client its HTTP work and the member its HTTP-to-gRPC proxy, which bound how many locks per second many
 * workers of one process can take on distinct names.
 *
 * Why one request gives each transaction the answer it would have had alone:
 * - Each one reads and writes only keys under its own footprint (a lock's `<name>/`), and a batch never holds
 *   two footprints where one starts with the other. etcd evaluates every compare of a transaction before it
 *   applies any operation, and here no operation can change what another one compares or reads.
 * - All of them are applied at one revision. A fencing token (a key's create revision) is compared only with
 *   tokens of its own name, and one name is in a batch at most once, so no two tokens of one name tie.
 * - Nothing waits for a batch to fill: what is queued when the turn ends goes at once, and a lone
 *   transaction goes as its own request, byte for byte. So no caller waits behind another's request.
 * - If the server refuses the batch (one caller's lease is gone, a permission, a limit on operations), each
 *   transaction is sent again alone, and gets its own answer. A lost answer is the same for all of them, as
 *   it would be alone; only transactions that are safe to resend are batched.
 * - A caller's signal ends its own wait (ABORTED, its outcome unknown, as for any request already sent); the
 *   request is aborted once every caller in it has stopped waiting.
 */
export class TxnBatcher {
  readonly #transport: Transport;
  #open: Batch[] = [];

  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /** Sends `json` (a transaction request) with others whose footprints are disjoint from `footprint`. */
  send(json: string, footprint: string, options: CallOptions): Promise<wire.WireTxn> {
    return new Promise((resolve, reject) => {
      // Bad options are refused here, before the call shares a request with other callers.
      resolveSignal(options.signal);
      resolveTimeout(options.timeout, "timeout");
      resolveTimeout(options.attemptTimeout, "attemptTimeout");
      const member: Member = { json, footprint, options, resolve, reject };
      if (this.#open.length === 0) queueMicrotask(() => this.#flush());
      this.#batchFor(member).push(member);
    });
  }

  #batchFor(member: Member): Batch {
    const { timeout, attemptTimeout } = member.options;
    for (const batch of this.#open) {
      const first = batch[0]!.options;
      if (
        batch.length < MAX_BATCH &&
        first.timeout === timeout &&
        first.attemptTimeout === attemptTimeout &&
        !batch.some((m) => overlaps(m.footprint, member.footprint))
      ) {
        return batch;
      }
    }
    const batch: Batch = [];
    this.#open.push(batch);
    return batch;
  }

  #flush(): void {
    const batches = this.#open;
    this.#open = [];
    for (const batch of batches) {
      if (batch.length === 1) this.#alone(batch[0]!);
      else this.#together(batch);
    }
  }

  /** One transaction, as its own request. */
  #alone(member: Member): void {
    this.#transport.unary(txnCall(member.json, "idempotent", true), member.options).then(member.resolve, member.reject);
  }

  #together(members: Batch): void {
    const { timeout, attemptTimeout } = members[0]!.options;
    const request = new AbortController();
    let waiting = members.length;
    const onSent = () => {
      for (const member of members) member.options.onSent?.();
    };
    const sent = this.#transport.unary(
      txnCall(`{"success":[${members.map((m) => `{"request_txn":${m.json}}`).join(",")}]}`, "idempotent", true),
      {
        signal: request.signal,
        timeout,
        attemptTimeout,
        onSent,
      },
    );
    members.forEach((member, i) => {
      const signal = member.options.signal;
      // Its own signal ends its own wait (outcome unknown); the request is aborted once nobody waits for it.
      const own = signal === undefined ? sent : untilAborted(sent, signal);
      own.then(
        ({ header, responses }) => {
          const nested = responses?.[i]?.response_txn;
          // A 200 answer that lacks one: not etcd's answer to this request.
          if (nested === undefined)
            member.reject(badField("responses", responses?.length, `lack txn ${i} of the batch`));
          else member.resolve({ header, succeeded: nested.succeeded, responses: nested.responses });
        },
        (error: unknown) => {
          if (signal?.aborted) {
            if (--waiting === 0) request.abort(signal.reason);
            member.reject(aborted(signal.reason, undefined, true));
          } else if (unanswered(error)) {
            member.reject(error);
          } else {
            // Refused as a whole (nothing of it applied): each one alone gets its own answer.
            member.options.onRefused?.();
            this.#alone(member);
          }
        },
      );
    });
  }
}

/** At most this many transactions in one request: etcd refuses more than 128 operations per branch by default. */
const MAX_BATCH = 32;

interface Member {
  json: string;
  footprint: string;
  options: CallOptions;
  resolve: (answer: wire.WireTxn) => void;
  reject: (error: unknown) => void;
}

/** Members started in one turn that go in one request; their calls have the same time budgets. */
type Batch = Member[];

/** Two footprints overlap when one is a prefix of the other: keys of one may sort under the other. */
function overlaps(a: string, b: string): boolean {
  return a.startsWith(b) || b.startsWith(a);
}
