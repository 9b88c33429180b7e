import { refused } from "../../errors/catalogue.js";
import type { EtcdError } from "../../errors/etcd-error.js";
import type { HoldingKind } from "../../events/events.js";

/** What an acquisition is for, as errors and events name it. */
export interface Subject {
  kind: HoldingKind;
  /** The name it was asked on; several names joined with ", " for `lockAll`. */
  name: string;
}

/** How errors name it: "lock x", "permit of semaphore y", "leadership of z". */
export function subjectText({ kind, name }: Subject): string {
  switch (kind) {
    case "lock":
      return `lock ${name}`;
    case "locks":
      return `locks ${name}`;
    case "read":
      return `read lock ${name}`;
    case "write":
      return `write lock ${name}`;
    case "permit":
      return `permit of semaphore ${name}`;
    case "leadership":
      return `leadership of ${name}`;
  }
}

/** etcd's RBAC refused an acquisition's keys: the grant it needs is readwrite on each name's prefix. */
export function refusedHere(subject: Subject, keys: readonly string[], cause: EtcdError): EtcdError {
  const prefixes = new Set(keys.map((key) => JSON.stringify(key.slice(0, key.lastIndexOf("/") + 1))));
  return refused(subjectText(subject), `readwrite on prefix ${[...prefixes].join(" and ")}`, cause);
}
