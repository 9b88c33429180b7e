import { invalidArgument, REDACTED } from "../errors/catalogue.js";
import { type GatewayConfig, type GatewayOptions, resolveGatewayConfig } from "../gateway/config.js";
import { type Bytes, toBytes } from "./bytes.js";

/** Options of `new Etcd(...)`: where etcd is and how to reach it, plus the client's key namespace. */
export interface EtcdOptions extends GatewayOptions {
  /** A key prefix applied to every key sent and stripped from every key received. */
  namespace?: Bytes | undefined;
}

/** {@link EtcdOptions} checked once, defaults filled in. */
export interface ResolvedConfig extends GatewayConfig {
  /** The key prefix as bytes; empty without a namespace. */
  readonly namespace: Uint8Array;
}

/** Checks the options once, with messages that say what to fix, and fills in the defaults. */
export function resolveConfig(options: EtcdOptions): ResolvedConfig {
  if (typeof options !== "object" || options === null) {
    throw invalidArgument("new Etcd(options): options must be an object with `endpoints`");
  }
  return {
    ...resolveGatewayConfig(options),
    // A copy: the caller's array may change later, and the namespace must not move under live keys.
    namespace: options.namespace === undefined ? new Uint8Array(0) : toBytes(options.namespace).slice(),
  };
}

/**
 * A copy of `config` to hand out: changing it changes nothing. The config holds no secret to hide (the
 * password and credential headers already read `"[redacted]"` there).
 */
export function redacted(config: ResolvedConfig): ResolvedConfig {
  return {
    ...config,
    auth: config.auth === undefined ? undefined : { username: config.auth.username, password: REDACTED },
    headers: { ...config.headers },
    endpoints: [...config.endpoints],
    namespace: config.namespace.slice(),
  };
}
