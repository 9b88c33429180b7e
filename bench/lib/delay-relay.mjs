// The delay relay of the round-trip section: the tests' TCP relay (test/support/tcp-proxy.ts, loaded by
// Node's type stripping) with each direction late by a one-way delay, so a round trip through it costs
// rtt = 2 × the delay more than on loopback. It relays bytes whatever the protocol, so etcd3's gRPC
// (HTTP/2) and the gateway's HTTP/1.1, which share etcd's client port, are delayed alike.
import { startTcpProxy } from "../../test/support/tcp-proxy.ts";

/**
 * A relay to `endpoint` adding `rttMs` to every round trip: `url` replaces the endpoint, `close()` ends it,
 * and `lateness` lists how many ms past its due time each chunk left (timers run late on a busy machine).
 */
export async function startDelayRelay(endpoint, rttMs) {
  const lateness = [];
  const relay = await startTcpProxy(endpoint, { oneWayMs: rttMs / 2, onLate: (ms) => lateness.push(ms) });
  return { url: relay.url, close: () => relay.close(), lateness };
}
