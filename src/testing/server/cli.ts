#!/usr/bin/env node
/**
 * `npx etcd-edge-mock [--port 2379] [--host 127.0.0.1] [--etcd-version 3.4|3.5|3.6|3.7] [--clock wall|virtual]`:
 * the in-memory etcd on a loopback port, until SIGINT or SIGTERM.
 */
import { parseArgs } from "node:util";
import { ETCD_VERSIONS, type EtcdVersion } from "../wire/dialect.js";
import { serveMockEtcd } from "./index.js";

const isVersion = (value: string): value is EtcdVersion => (ETCD_VERSIONS as readonly string[]).includes(value);

const USAGE = `usage: etcd-edge-mock [--port 2379] [--host 127.0.0.1] [--etcd-version 3.4|3.5|3.6|3.7]
                      [--clock wall|virtual]
An in-memory etcd member speaking etcd's gRPC-gateway JSON API (v3 KV, lease, watch, lock, election,
maintenance status, member list) over HTTP. Data lives in memory and is gone when the process ends.`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: "string", default: "2379" },
      host: { type: "string", default: "127.0.0.1" },
      "etcd-version": { type: "string", default: "3.4" },
      clock: { type: "string", default: "wall" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const port = Number(values.port);
  const version = values["etcd-version"];
  const clock = values.clock;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port must be 0..65535, got ${values.port}`);
  if (!isVersion(version)) throw new Error(`--etcd-version must be one of ${ETCD_VERSIONS.join(", ")}, got ${version}`);
  if (clock !== "wall" && clock !== "virtual") throw new Error(`--clock must be wall or virtual, got ${clock}`);
  const server = await serveMockEtcd({ port, host: values.host, version, clock });
  console.log(`etcd-edge-mock: etcd ${version} gateway on ${server.url} (${clock} clock)`);
  const stop = () => {
    void server.close().then(() => process.exit(0));
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

main().catch((err: unknown) => {
  console.error(`etcd-edge-mock: ${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
  process.exit(2);
});
