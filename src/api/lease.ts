import { leaseToUse, ttlArg } from "./args.js";
import { toText } from "./bytes.js";
import { decodeHeader, int, leaseIdOf, signedInt, type LeaseId, type ResponseHeader } from "./codec.js";
import type { Keyspace } from "./keyspace.js";
import { badField, leaseGrantFailed, leaseNotFound } from "../errors/catalogue.js";
import { resolveFlag } from "../gateway/config.js";
import type { CallOptions, Transport } from "../gateway/transport.js";
import * as wire from "../gateway/wire.js";

/** A granted lease: `lease.grant()`. */
export interface LeaseGrantResult {
  /** Which member answered, at which store revision. */
  header: ResponseHeader;
  /** The new lease's ID: attach keys to it with `put(key, value, { lease: id })`. */
  id: LeaseId;
  /** The TTL the server granted, in seconds (it raises very small requests to its minimum). */
  ttl: number;
}

/** A renewed lease: `lease.keepAliveOnce()`. */
export interface LeaseKeepAliveResult {
  /** Which member answered, at which store revision. */
  header: ResponseHeader;
  /** The lease renewed. */
  id: LeaseId;
  /** Seconds the lease now has left. */
  ttl: number;
}

/** A lease's state: `lease.timeToLive()`. */
export interface LeaseTimeToLiveResult {
  /** Which member answered, at which store revision. */
  header: ResponseHeader;
  /** The lease asked about. */
  id: LeaseId;
  /** Seconds left. */
  ttl: number;
  /** The TTL in seconds the lease was granted with, which each renewal restores. */
  grantedTtl: number;
  /**
   * Attached keys as text, when asked for with `keys: true`. Only keys in the client's namespace, which is
   * stripped: a lease is cluster-wide and may hold keys of other namespaces.
   */
  keys: string[];
  /** The same keys as bytes. */
  keyBytes: Uint8Array[];
}

/** The cluster's live leases: `lease.list()`. */
export interface LeaseListResult {
  /** Which member answered, at which store revision. */
  header: ResponseHeader;
  /** The ID of every live lease, whoever granted it. */
  leases: LeaseId[];
}

/**
 * Leases: time-bound ownership of keys. Every call is one request. Leases are cluster-wide: the client's
 * namespace does not apply to them, so any client can renew, revoke or look up any lease whose ID it has,
 * whatever namespace granted it, and `list()` shows every lease of the cluster. Lease 0 means "no lease" to
 * etcd and is refused here (INVALID_ARGUMENT) wherever a lease is to be acted on.
 */
export class LeaseClient {
  readonly #transport: Transport;
  readonly #keyspace: Keyspace;

  /** @internal */
  constructor(transport: Transport, keyspace: Keyspace) {
    this.#transport = transport;
    this.#keyspace = keyspace;
  }

  /**
   * A new lease of `ttl` seconds; `id` asks for a specific ID (not 0; ALREADY_EXISTS if any client of the
   * cluster holds it: IDs are cluster-wide).
   */
  async grant(
    ttl: number,
    options: CallOptions & {
      id?: LeaseId | undefined;
      /** @internal Resend after a lost answer: with an `id`, a repeat finds the lease granted (ALREADY_EXISTS). */
      idempotent?: boolean | undefined;
    } = {},
  ): Promise<LeaseGrantResult> {
    const seconds = ttlArg(ttl);
    const requested = options.id === undefined ? undefined : leaseToUse(options.id, "id");
    const result = await this.#transport.unary(
      {
        path: "/v3/lease/grant",
        body: { TTL: String(seconds), ID: requested },
        schema: wire.leaseGrant,
        retry: options.idempotent && requested !== undefined ? "idempotent" : "write",
        writes: true,
      },
      options,
    );
    if (result.error) throw leaseGrantFailed(result.error);
    // Without an ID there is no lease: keys "bound" to lease 0 would never expire.
    const granted = leaseIdOf(result.ID, "ID");
    if (granted === "0" || (requested !== undefined && granted !== requested)) {
      throw badField(
        "ID",
        result.ID,
        requested === undefined ? "is not a granted lease" : `is not the lease asked for (${requested})`,
      );
    }
    const grantedTtl = int(result.TTL, "TTL");
    if (grantedTtl === 0) throw badField("TTL", result.TTL, "is not a granted lease's TTL");
    return { header: decodeHeader(result.header), id: granted, ttl: grantedTtl };
  }

  /**
   * Ends the lease now and deletes its keys: all of them, in every namespace (a lease is cluster-wide, and
   * this works on another tenant's lease as on one's own). LEASE_NOT_FOUND if it has already ended.
   */
  async revoke(
    lease: LeaseId,
    options: CallOptions & {
      /** @internal Resend after a lost answer. */
      idempotent?: boolean | undefined;
    } = {},
  ): Promise<{
    /** Which member answered, at which store revision. */
    header: ResponseHeader;
  }> {
    const result = await this.#transport.unary(
      {
        path: "/v3/lease/revoke",
        body: { ID: leaseToUse(lease) },
        schema: wire.headerOnly,
        retry: options.idempotent ? "idempotent" : "write",
        writes: true,
      },
      options,
    );
    return { header: decodeHeader(result.header) };
  }

  /**
   * Renews the lease to its full TTL with one request: any live lease of the cluster, whatever namespace
   * granted it. LEASE_NOT_FOUND once it has expired.
   */
  async keepAliveOnce(lease: LeaseId, options: CallOptions = {}): Promise<LeaseKeepAliveResult> {
    const leaseId = leaseToUse(lease);
    const result = await this.#transport.unary(
      {
        path: "/v3/lease/keepalive",
        body: { ID: leaseId },
        schema: wire.leaseKeepAlive,
        retry: "idempotent",
        firstLine: true,
      },
      options,
    );
    sameLease(leaseId, result.ID);
    const ttl = signedInt(result.TTL, "TTL");
    if (ttl <= 0) throw leaseNotFound(leaseId);
    return { header: decodeHeader(result.header), id: leaseId, ttl };
  }

  /**
   * The lease's remaining and granted TTL, and with `keys: true` its keys: any lease of the cluster, whatever
   * namespace granted it, but only its keys in this client's namespace are shown. LEASE_NOT_FOUND once ended.
   */
  async timeToLive(
    lease: LeaseId,
    options: CallOptions & { keys?: boolean | undefined } = {},
  ): Promise<LeaseTimeToLiveResult> {
    const leaseId = leaseToUse(lease);
    const keys = resolveFlag(options.keys, "keys");
    const result = await this.#transport.unary(
      {
        path: "/v3/lease/timetolive",
        body: { ID: leaseId, keys: keys || undefined },
        schema: wire.leaseTimeToLive,
        retry: "idempotent",
      },
      options,
    );
    sameLease(leaseId, result.ID);
    const ttl = signedInt(result.TTL, "TTL");
    if (ttl < 0) throw leaseNotFound(leaseId);
    // A lease is cluster-wide and may hold keys of other namespaces: only ours are shown, stripped.
    const keyBytes: Uint8Array[] = [];
    for (const key of result.keys ?? []) {
      const own = this.#keyspace.decodeOwn(key);
      if (own !== undefined) keyBytes.push(own);
    }
    return {
      header: decodeHeader(result.header),
      id: leaseId,
      ttl,
      grantedTtl: int(result.grantedTTL, "grantedTTL"),
      keys: keyBytes.map(toText),
      keyBytes,
    };
  }

  /** Every live lease of the cluster, whatever namespace granted it (a namespace does not filter leases). */
  async list(options: CallOptions = {}): Promise<LeaseListResult> {
    const result = await this.#transport.unary(
      { path: "/v3/lease/leases", body: {}, schema: wire.leaseLeases, retry: "idempotent" },
      options,
    );
    return {
      header: decodeHeader(result.header),
      leases: (result.leases ?? []).map((lease) => leaseIdOf(lease.ID, "ID")),
    };
  }
}

/** An answer about a lease must be about the lease asked for. */
function sameLease(asked: LeaseId, answered: string | number | undefined): void {
  if (leaseIdOf(answered, "ID") !== asked)
    throw badField("ID", answered, `does not match the lease asked about (${asked})`);
}
