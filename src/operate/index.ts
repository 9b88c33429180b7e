/**
 * `etcd-edge/operate`: what an operator does to locks, beside what a lock user does. {@link EtcdOperator} is the
 * `Etcd` front door plus who holds what (`inspectLock`, `inspectSemaphore`), taking a lock away (`revokeLock`)
 * and asking for it back (`requestRelease`); `npx etcd-edge locks` is built on it. An entry of its own, so the
 * functions a service that only takes locks never calls stay out of its bundle.
 *
 * @module etcd-edge/operate
 */
export { EtcdOperator } from "./operator.js";
export type { LineEntry, LockInfo, SemaphoreInfo } from "../lock/operate/inspect.js";
export type { Revoked, RevokeOptions } from "../lock/operate/revoke.js";
