// Values handed from vitest.config.ts (`provide`) and test/etcd/global-setup.ts to tests via `inject()`.
import "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** Client URL of the etcd member started by global-setup (etcd project only). */
    etcdEndpoint: string;
    backend: "mock" | "etcd";
  }
}
