// The client's own base64 (api/bytes.ts: a table to encode, atob to decode) against Node's, for every length and
// byte: the gateway reads every key, value and range end the client sends through it.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeBytes, fromBase64, toBase64 } from "../../src/api/bytes.js";

describe("base64", () => {
  it("encodes bytes as Node does, and decodes them back", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const text = toBase64(bytes);
        expect(text).toBe(Buffer.from(bytes).toString("base64"));
        expect(fromBase64(text)).toEqual(new Uint8Array(bytes));
      }),
      { numRuns: 2_000 },
    );
  });

  it("encodes text as its UTF-8 bytes, ASCII or not", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 60 }), (text) => {
        expect(encodeBytes(text)).toBe(Buffer.from(text, "utf8").toString("base64"));
      }),
      { numRuns: 1_000 },
    );
  });

  it("decodes a large value, and refuses what is not padded standard base64", () => {
    const big = new Uint8Array(1 << 20).map((_, i) => (i * 31) & 0xff);
    expect(fromBase64(toBase64(big))).toEqual(big);
    for (const bad of ["abc", "ab=c", "a-b_", "Zm9v\n"]) {
      expect(() => fromBase64(bad)).toThrow(expect.objectContaining({ code: "BAD_RESPONSE" }));
    }
  });
});
