// Reverse proxies from Debian's packages (nginx, HAProxy, Caddy) in front of an etcd member, each started from the
// configuration docs/deploying.md gives, as written: the one a user first writes and the recommended one. TLS is
// terminated at the proxy (a private CA issues its certificate); etcd is plain HTTP behind it. The doc's upstream,
// listen port and certificate paths are replaced by the test's; its read timeouts are shortened (READ_TIMEOUT_S),
// as a proxy's 60 s read timeout would be in a long run. No vitest import: a global setup and the bench load it.
import { type ChildProcess, execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { codeBlocks } from "./doc-blocks.ts";
import { freePort } from "./ports.ts";
import type { Pki } from "./pki.ts";
import { onLines, spawnChild } from "./processes.ts";

export const PROXIES = ["nginx", "haproxy", "caddy"] as const;
export type ProxyKind = (typeof PROXIES)[number];
/** The configuration a user first writes, and the one docs/deploying.md recommends. */
export type ProxyConfig = "first" | "recommended";

/**
 * Whether `kind` as configured holds streamed answers back until they end (nginx as first written: its
 * proxy_buffering is on), so a watch through it sees nothing until the stream ends, and ends STREAM_HELD_BACK.
 */
export function holdsStreamsBack(kind: ProxyKind | undefined, config: ProxyConfig | undefined): boolean {
  return kind === "nginx" && config === "first";
}

/** The read timeout the tests give a proxy, in seconds, standing in for 60 s: longer than a lock stream's life. */
export const READ_TIMEOUT_S = 5;

const DOC = "docs/deploying.md";
const DOC_UPSTREAM = "etcd.internal:2379";
const DOC_CERTS = "/etc/ssl/etcd-proxy/";

export interface Proxy {
  kind: ProxyKind;
  config: ProxyConfig;
  /** Where clients reach etcd through it: `https://127.0.0.1:<port>`. */
  url: string;
  stop(): Promise<void>;
}

/** The doc's configuration of `kind`, as written: the first block of its section, or the recommended (second). */
export function documented(kind: ProxyKind, config: ProxyConfig): string {
  const heading = { nginx: "## nginx", haproxy: "## HAProxy", caddy: "## Caddy" }[kind];
  const blocks = codeBlocks(DOC, heading, kind);
  return blocks[config === "first" ? 0 : 1]!;
}

/**
 * Starts `kind` with the doc's `config` in front of `upstream` (`http://127.0.0.1:<port>`), its certificate issued
 * by the PKI's CA `ca` for 127.0.0.1, in a directory of its own under the PKI's. Its read and keep-alive timeouts
 * are READ_TIMEOUT_S, unless `asWritten` keeps the doc's (the bench's idle calls need them).
 */
export async function startProxy(
  kind: ProxyKind,
  config: ProxyConfig,
  upstream: string,
  pki: Pki,
  { ca = "ca", asWritten = false }: { ca?: string; asWritten?: boolean } = {},
): Promise<Proxy> {
  const dir = pki.path(`${kind}-${config}`);
  mkdirSync(dir, { recursive: true });
  const name = `${kind}-${config}-server`;
  await pki.issue(name, {
    subject: "/CN=127.0.0.1",
    ca,
    extensions: "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
  });
  writeFileSync(join(dir, "server.pem"), Buffer.concat([pki.pem(`${name}.crt`), pki.pem(`${name}.key`)]));
  const port = await freePort();
  const local = (text: string) =>
    text
      .replaceAll(DOC_UPSTREAM, new URL(upstream).host)
      .replaceAll(`${DOC_CERTS}server.crt`, pki.path(`${name}.crt`))
      .replaceAll(`${DOC_CERTS}server.key`, pki.path(`${name}.key`))
      .replaceAll(`${DOC_CERTS}server.pem`, join(dir, "server.pem"))
      .replace(/\b(60|75)s\b/g, (timeout) => (asWritten ? timeout : `${READ_TIMEOUT_S}s`));
  const written = local(documented(kind, config));
  const child = spawn(kind, dir, written, port);
  const url = `https://127.0.0.1:${port}`;
  await ready(child, url, kind, pki.path(`${ca}.crt`));
  return {
    kind,
    config,
    url,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await Promise.race([gone, new Promise((resolve) => setTimeout(resolve, 3_000))]);
      child.kill("SIGKILL");
    },
  };
}

/** The proxy in the foreground, with the doc's configuration wrapped in what its file needs around it. */
function spawn(kind: ProxyKind, dir: string, written: string, port: number): ChildProcess {
  switch (kind) {
    case "nginx": {
      const conf = join(dir, "nginx.conf");
      const temp = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
        .map((t) => `${t}_temp_path ${join(dir, t)};`)
        .join(" ");
      const server = written.replace(/listen 443 ssl/, `listen 127.0.0.1:${port} ssl`);
      writeFileSync(
        conf,
        `worker_processes 1;\npid ${join(dir, "nginx.pid")};\nerror_log ${join(dir, "error.log")};\n` +
          `events { worker_connections 1024; }\nhttp {\n  access_log off;\n  ${temp}\n${server}\n}\n`,
      );
      return spawnChild("nginx", ["-c", conf, "-g", "daemon off;"], { cwd: dir });
    }
    case "haproxy": {
      const conf = join(dir, "haproxy.cfg");
      const body = written.replace(/bind :443/, `bind 127.0.0.1:${port}`);
      writeFileSync(conf, `global\n    maxconn 1024\n\n${body}\n`);
      return spawnChild("haproxy", ["-f", conf, "-db"], { cwd: dir });
    }
    case "caddy": {
      const conf = join(dir, "Caddyfile");
      const site = written.replace(/^etcd\.example\.com \{/m, `https://127.0.0.1:${port} {`);
      writeFileSync(
        conf,
        `{\n    admin off\n    auto_https disable_redirects\n    storage file_system ${dir}\n}\n${site}\n`,
      );
      return spawnChild("caddy", ["run", "--config", conf, "--adapter", "caddyfile"], {
        cwd: dir,
        env: { ...process.env, HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir },
      });
    }
  }
}

/** Waits until etcd answers through the proxy (its `/version`), or fails with the proxy's own output. */
async function ready(child: ChildProcess, url: string, kind: ProxyKind, caFile: string): Promise<void> {
  const output: string[] = [];
  for (const stream of [child.stdout, child.stderr]) if (stream) onLines(stream, (line) => output.push(line));
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${kind} exited: ${output.slice(-10).join("\n")}`);
    try {
      const answer = execFileSync("curl", ["-sf", "--max-time", "2", "--cacert", caFile, `${url}/version`]);
      if (answer.toString().includes("etcdserver")) return;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${kind} at ${url} did not answer within 15 s: ${output.slice(-10).join("\n")}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
