// Values handed from test/runtimes/global-setup.ts to tests via `inject()`.
import "vitest";
import type { EtcdVersion } from "../support/etcd-versions.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Temp project with the packed etcd-edge in node_modules and the shared scripts (runtimes project only). */
    runtimesProject: string;
    /** Client URL of the member of each etcd version that global-setup started (runtimes project only). */
    etcdEndpointByVersion: Record<EtcdVersion, string>;
  }
}
