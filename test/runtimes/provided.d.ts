// Values handed from test/runtimes/global-setup.ts (and test/etcd/global-setup.ts) to tests via `inject()`.
/// <reference path="../etcd/provided.d.ts" />
import "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** Temp project with the packed etcd-edge in node_modules and the shared scripts (runtimes project only). */
    runtimesProject: string;
  }
}
