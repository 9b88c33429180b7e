// Who may stand in a line (src/lock/line/keys.ts): the form of each recipe's contender key, and the refusal of
// every other key a contender reads (issue 37, finding 4: a stranger met by one contender must be refused by all).
// A form check that lets a stranger through makes a contender wait behind a key that never goes; one that refuses
// a contender refuses a lock that is only busy.
import { describe, expect, it } from "vitest";
import type { KeyValue } from "../../src/api/codec.js";
import { isEtcdError } from "../../src/errors/etcd-error.js";
import { contenders, isKeyOf, KeyTaken, type KeyKind, nameArg, newKey } from "../../src/lock/line/keys.js";

const PREFIX = "jobs/";
const HEX16 = "0123456789abcdef";

/** Keys of each kind's form under PREFIX, and keys that are not (each differs from a good one in one way). */
const FORMS: Record<KeyKind, { good: string[]; bad: string[] }> = {
  mutex: {
    good: ["694d7b1c2a", `694d7b1c2a_${HEX16}`, "1"],
    bad: [
      "0694d7b1c2a", // a leading zero: no lease ID is written so
      `694d7b1c2a-${HEX16}`, // a permit's separator
      `694d7b1c2a_${HEX16.slice(1)}`, // 15 hex
      `694d7b1c2a_${HEX16}0`, // 17 hex
      `x694d7b1c2a_${HEX16}`, // something before the lease
      `694d7b1c2a_${HEX16}/x`, // a lock named under this one
      "694D7B1C2A", // upper case
      `read/694d7b1c2a-${HEX16}`, // a read-write lock's
      "data",
    ],
  },
  permit: {
    good: [`694d7b1c2a-${HEX16}`, `1-${HEX16}`],
    bad: [
      `0694d7b1c2a-${HEX16}`,
      `694d7b1c2a_${HEX16}`,
      "694d7b1c2a", // Go's form: a mutex's, not a permit's
      `694d7b1c2a-${HEX16.slice(1)}`,
      `694d7b1c2a-${HEX16}0`,
      `x694d7b1c2a-${HEX16}`,
      `694d7b1c2a-${HEX16}/x`,
      `694g7b1c2a-${HEX16}`, // not hex in the lease
      `694d7b1c2a-0123456789abcdeg`, // not hex in the random part
      `-${HEX16}`, // no lease
    ],
  },
  rw: {
    good: [`read/694d7b1c2a-${HEX16}`, `write/694d7b1c2a-${HEX16}`, `write/1-${HEX16}`],
    bad: [
      `694d7b1c2a-${HEX16}`, // a permit's
      `x/read/694d7b1c2a-${HEX16}`, // something before the role
      `reads/694d7b1c2a-${HEX16}`,
      `read/0694d7b1c2a-${HEX16}`,
      `read/694d7b1c2a_${HEX16}`,
      `read/694d7b1c2a-${HEX16.slice(1)}`,
      `read/694d7b1c2a-${HEX16}0`,
      `read/694d7b1c2a-${HEX16}/x`,
      `write/694g7b1c2a-${HEX16}`,
      `write/694d7b1c2a-0123456789abcdeg`,
      `write/-${HEX16}`,
    ],
  },
};

const kv = (key: string, lease = "7587888"): KeyValue =>
  ({ key, lease, value: "", createRevision: 5, modRevision: 5, version: 1 }) as KeyValue;

describe.each(Object.keys(FORMS) as KeyKind[])("a %s line", (kind) => {
  it.each(FORMS[kind].good)("takes %s as a contender", (rest) => {
    expect(isKeyOf(kind, PREFIX, `${PREFIX}${rest}`)).toBe(true);
    expect(() => contenders(kind, PREFIX, [kv(`${PREFIX}${rest}`)])).not.toThrow();
  });

  it.each(FORMS[kind].bad)("refuses %s with LOCK_NAME_CONFLICT, naming the key and the lock", (rest) => {
    expect(isKeyOf(kind, PREFIX, `${PREFIX}${rest}`)).toBe(false);
    const refused = refusal(() => contenders(kind, PREFIX, [kv(`${PREFIX}${rest}`)]));
    expect(refused.message).toBe(
      `key ${PREFIX}${rest} under lock jobs is not a lock contender: keys under "jobs/" belong to its contenders: ` +
        "keep data, other locks and other recipes elsewhere",
    );
  });

  it("takes nothing under another prefix, even of its form", () => {
    const rest = FORMS[kind].good[0]!;
    expect(isKeyOf(kind, PREFIX, `other/${rest}`)).toBe(false);
  });

  it("refuses a key of its form bound to no lease: it would never go", () => {
    const key = `${PREFIX}${FORMS[kind].good[0]}`;
    const refused = refusal(() =>
      contenders(kind, PREFIX, [kv(`${PREFIX}${FORMS[kind].good.at(-1)}`)], [kv(key, "0")]),
    );
    expect(refused.message).toContain(`key ${key} under lock jobs is not a lock contender: it is bound to no lease`);
  });

  it("makes keys of its own form, fresh each time", () => {
    const sub = kind === "rw" ? "write/" : "";
    const a = newKey(PREFIX, "7587888", kind, sub);
    expect(isKeyOf(kind, PREFIX, a)).toBe(true);
    expect(a.startsWith(`${PREFIX}${sub}73c830`)).toBe(true); // 7587888 in hex
    expect(newKey(PREFIX, "7587888", kind, sub)).not.toBe(a);
  });
});

describe("the errors of a line's keys", () => {
  it("a key a join found there names it, and is final: never sent again", () => {
    const taken = new KeyTaken("jobs/73c870_0123456789abcdef");
    expect(taken.code).toBe("ALREADY_EXISTS");
    expect(taken.message).toBe("key jobs/73c870_0123456789abcdef is another acquisition's");
  });

  it("a name that is not a string says what it got", () => {
    expect(refusal(() => nameArg(7, "an election")).message).toBe(
      "an election name must be a non-empty string, got number 7",
    );
    expect(nameArg("jobs", "a lock")).toBe("jobs");
  });
});

function refusal(run: () => unknown): Error & { code: string } {
  try {
    run();
  } catch (error) {
    if (isEtcdError(error)) return error;
    throw error;
  }
  throw new Error("expected a refusal");
}
