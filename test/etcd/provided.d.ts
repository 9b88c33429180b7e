// Values handed from vitest.config.ts (`provide`) and test/etcd/global-setup.ts to tests via `inject()`.
import "vitest";
import type { EtcdVersion as MockVersion } from "../../src/testing/index.js";
import type { EtcdVersion } from "../support/etcd-versions.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Which backend the conformance suites run on: the in-memory mock (unit, unit-3.x) or real etcd (etcd-3.x). */
    backend: "mock" | "etcd";
    /** Whose wire the mock speaks in a mock project (unit: 3.4). */
    mockVersion: MockVersion;
    /** The etcd version of this etcd-3.x project (from vitest.config.ts). */
    etcdVersion: EtcdVersion;
    /** What that project's etcd reports, e.g. "3.5.16" (from global-setup). */
    etcdRelease: string;
    /** Client URLs of the shared members global-setup started, one per worker: see sharedEndpoint(). */
    etcdEndpoints: string[];
    /** In a `proxy-*` project: the proxy in front of the member (test/proxies/global-setup.ts). */
    proxy?: import("../support/proxies.js").ProxyKind;
    /** Its configuration: as a user first writes it, or as docs/deploying.md recommends. */
    proxyConfig?: import("../support/proxies.js").ProxyConfig;
    /** The CA (PEM file) that issued the proxy's certificate: `etcdEndpoints` are https through it. */
    proxyCa?: string;
    /** The member behind the proxy, reached directly (for a writer that must not go through the proxy). */
    directEndpoint?: string;
  }
}
