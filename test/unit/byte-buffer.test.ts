// ByteBuffer keeps chunks as they come, copies small views of larger buffers into pack blocks, and joins
// once: whatever the chunking, what is taken is exactly what was appended, in order.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ByteBuffer } from "../../src/gateway/byte-buffer.js";

/**
 * A chunk as a stream may hand it out: a whole array of its own, or a view of a larger buffer (a socket
 * read), `before` bytes in and `after` bytes short of its end; `shared` cuts it from the same buffer as the
 * chunk before, as the parts of one read around a framing boundary are.
 */
const chunk = fc.record({
  bytes: fc.uint8Array({ minLength: 0, maxLength: 300 }),
  before: fc.nat({ max: 2000 }),
  after: fc.nat({ max: 70_000 }),
  shared: fc.boolean(),
  take: fc.boolean(),
});

describe("ByteBuffer", () => {
  it("takes exactly the bytes appended since the last take, however they were chunked", () => {
    fc.assert(
      fc.property(fc.array(chunk, { maxLength: 40 }), (chunks) => {
        const buffer = new ByteBuffer(1 << 24);
        let expected: number[] = [];
        let previous: { buffer: ArrayBuffer; end: number } | undefined;
        for (const { bytes, before, after, shared, take } of chunks) {
          let view: Uint8Array;
          if (shared && previous !== undefined && previous.end + bytes.length <= previous.buffer.byteLength) {
            view = new Uint8Array(previous.buffer, previous.end, bytes.length);
            previous.end += bytes.length;
          } else {
            const backing = new ArrayBuffer(before + bytes.length + after);
            view = new Uint8Array(backing, before, bytes.length);
            previous = { buffer: backing, end: before + bytes.length };
          }
          view.set(bytes);
          buffer.append(view);
          expected.push(...bytes);
          expect(buffer.length).toBe(expected.length);
          if (take) {
            expect([...buffer.take()]).toEqual(expected);
            expected = [];
          }
        }
        expect([...buffer.take()]).toEqual(expected);
        expect(buffer.length).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it("keeps whole chunks as they are, and copies a few bytes of a large buffer out of it", () => {
    const buffer = new ByteBuffer(1 << 20);
    const whole = new Uint8Array([1, 2, 3]);
    buffer.append(whole);
    expect(buffer.take()).toBe(whole);
    const read = new Uint8Array(64 * 1024).fill(7);
    buffer.append(new Uint8Array([9]));
    buffer.append(read.subarray(0, 5));
    const taken = buffer.take();
    expect([...taken]).toEqual([9, 7, 7, 7, 7, 7]);
    // The five bytes were copied: the 64 KiB read they were cut from is not what the result holds.
    expect(taken.buffer.byteLength).toBeLessThan(read.byteLength);
  });

  it("appendBounded stops at the limit and at the first newline", () => {
    const buffer = new ByteBuffer(10);
    expect(buffer.appendBounded(new Uint8Array(6), false)).toBe("more");
    expect(buffer.appendBounded(new Uint8Array(5), false)).toBe("over");
    expect(buffer.length).toBe(6);
    expect(buffer.appendBounded(new TextEncoder().encode("ab\ncd"), true)).toBe("line");
    expect(new TextDecoder().decode(buffer.take().subarray(6))).toBe("ab");
  });
});
