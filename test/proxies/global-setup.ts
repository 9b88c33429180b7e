// globalSetup of the `proxy-*` projects (vitest.config.ts): an etcd member of the day's version, and in front of
// it the project's proxy (nginx, HAProxy or Caddy) in the configuration docs/deploying.md gives, TLS terminated
// there by a private CA's certificate. The conformance suites then reach etcd through it (`etcdEndpoints`, and
// `proxyCa` for their fetch), as an edge function reaches its etcd.
/// <reference path="../etcd/provided.d.ts" />
import type { TestProject } from "vitest/node";
import { startEtcd } from "../support/etcd-members.js";
import { etcdBinaries } from "../support/etcd-versions.js";
import { Pki } from "../support/pki.js";
import { startProxy } from "../support/proxies.js";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { etcdVersion, proxy, proxyConfig } = project.getProvidedContext();
  if (etcdVersion === undefined || proxy === undefined || proxyConfig === undefined) {
    throw new Error(`project ${project.name} sets no etcdVersion, proxy or proxyConfig in vitest.config.ts`);
  }
  const { release, binDir } = etcdBinaries(etcdVersion);
  const member = await startEtcd({ name: `${proxy}-${proxyConfig}`, binDir });
  const pki = new Pki();
  try {
    await pki.ca("ca");
    const started = await startProxy(proxy, proxyConfig, member.clientUrl, pki);
    project.provide("etcdRelease", release);
    project.provide("etcdEndpoints", [started.url]);
    project.provide("proxyCa", pki.path("ca.crt"));
    project.provide("directEndpoint", member.clientUrl);
    return async () => {
      await started.stop();
      await member.stop();
      pki.remove();
    };
  } catch (error) {
    await member.stop();
    pki.remove();
    throw error;
  }
}
