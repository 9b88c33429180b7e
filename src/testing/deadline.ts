import { MAX_DELAY_MS } from "./clock.js";
import type { Dialect } from "./wire/dialect.js";
import { GrpcCode, GrpcStatusError } from "./wire/errors.js";

/**
 * A call's deadline, as etcd's gateway takes it from the `Grpc-Timeout` header and puts it on the call's context:
 * counted from the request's arrival, whatever the call does meanwhile. A watch stream ends at its deadline
 * however busy it is, with the deadline's error as its last line; a call that waits (v3lock's lock) answers with
 * that error. The SDK asks for one on every watch stream, so a mock that ignored it would never renew one.
 */
export class CallDeadline {
  /** The moment the call's context ends, on `performance.now()`'s clock. */
  private readonly at: number;

  private constructor(ms: number) {
    this.at = performance.now() + ms;
  }

  /**
   * The deadline the request asks for, if any. A value the gateway cannot read (`Infinitym`, no unit) is refused
   * before the call, with InvalidArgument, as Go's `strconv.ParseInt` and grpc-gateway's unit table refuse it.
   */
  static of(request: Request): CallDeadline | undefined {
    const value = request.headers.get("grpc-timeout");
    if (value === null) return undefined;
    const parsed = /^([+-]?\d{1,18})([HMSmun])$/.exec(value);
    if (parsed === null) throw GrpcStatusError.invalidArgument(`invalid grpc-timeout: ${value}`);
    return new CallDeadline(Number(parsed[1]) * UNIT_MS[parsed[2]!]!);
  }

  /**
   * Calls `fire` at the deadline. One beyond setTimeout's limit (`1000H`) is re-armed until then: given to
   * setTimeout as it is, it would fire at once.
   */
  private alarm(fire: () => void): { clear(): void } {
    let timer: ReturnType<typeof setTimeout>;
    const arm = () => {
      const left = Math.max(0, this.at - performance.now());
      timer = setTimeout(() => (left > MAX_DELAY_MS ? arm() : fire()), Math.min(MAX_DELAY_MS, left));
      // The deadline must not keep a test's process alive on its own.
      (timer as { unref?: () => void }).unref?.();
    };
    arm();
    return { clear: () => clearTimeout(timer) };
  }

  /**
   * `outer`, aborted also at the deadline with DeadlineExceeded as its reason: what a waiting call (v3lock's lock)
   * listens to, as etcd's handlers watch the call's context. `clear` once the call is over.
   */
  follow(outer: AbortSignal): { signal: AbortSignal; clear(): void } {
    const controller = new AbortController();
    const alarm = this.alarm(() => controller.abort(deadlineExceeded()));
    return { signal: AbortSignal.any([outer, controller.signal]), clear: alarm.clear };
  }

  /**
   * `body` until the deadline: then the server's side of the stream is canceled, and the deadline's error ends
   * it as one more line. Before any line was sent the stream fails with it instead, so that the answer becomes
   * the error's own status and line, as the gateway sends it when no header has gone out yet.
   */
  end(body: ReadableStream<Uint8Array>, dialect: Dialect): ReadableStream<Uint8Array> {
    const reader = body.getReader();
    let alarm: { clear(): void } | undefined;
    let sent = false;
    let over = false;
    /** The stream has ended one way or another: the deadline has nothing left to end. */
    const stop = () => {
      over = true;
      alarm?.clear();
    };
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        alarm = this.alarm(() => {
          if (over) return;
          stop();
          reader.cancel(deadlineExceeded()).catch(() => {});
          if (!sent) return controller.error(deadlineExceeded());
          controller.enqueue(encoder.encode(dialect.streamErrorLine(GrpcCode.DeadlineExceeded, DEADLINE_EXCEEDED)));
          controller.close();
        });
      },
      async pull(controller) {
        // A call that fails (its client went away) errors this stream with it.
        const { value, done } = await reader.read().catch((error: unknown) => {
          stop();
          throw error;
        });
        if (over) return;
        if (done) {
          stop();
          controller.close();
        } else {
          sent = true;
          controller.enqueue(value);
        }
      },
      cancel: (reason) => {
        stop();
        return reader.cancel(reason);
      },
    });
  }
}

const DEADLINE_EXCEEDED = "context deadline exceeded";

/** grpc-gateway's units: hours, minutes, seconds, milli-, micro- and nanoseconds. */
const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };

const encoder = new TextEncoder();

function deadlineExceeded(): GrpcStatusError {
  return new GrpcStatusError(GrpcCode.DeadlineExceeded, DEADLINE_EXCEEDED);
}
