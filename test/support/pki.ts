// Certificates for TLS tests, made by openssl in a temp directory: CAs, certificates they issue, self-signed
// ones, and any shell commands a doc gives (run as written, in that directory). No vitest import.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Runs `command` in `cwd`; resolves its stdout, rejects with its stderr. */
export function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env) {
  return new Promise<string>((resolve, reject) => {
    execFile(command, args, { cwd, env, timeout: 30_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${command} ${args.join(" ")}: ${stderr || error.message}`));
      else resolve(stdout);
    });
  });
}

export interface Issue {
  /** `-subj`, e.g. "/CN=etcd-server" or "/O=tests" (no CN). */
  subject: string;
  /** The issuing CA: its name (`<name>.crt`, `<name>.key`) or its files; none for a self-signed certificate. */
  ca?: string | { cert: string; key: string } | undefined;
  /** The extension file's lines, e.g. "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n". */
  extensions?: string | undefined;
  /** Validity in days; 0 makes a certificate that has expired a second later. Default 1. */
  days?: number | undefined;
}

/** A directory of PEM files: `<name>.crt` and `<name>.key` per certificate. */
export class Pki {
  readonly dir = mkdtempSync(join(tmpdir(), "etcd-edge-pki-"));

  path(file: string): string {
    return join(this.dir, file);
  }

  pem(file: string): Buffer {
    return readFileSync(this.path(file));
  }

  openssl(...args: string[]): Promise<string> {
    return run("openssl", args, this.dir);
  }

  /** Runs shell commands (a doc's, say) in this directory. */
  shell(script: string): Promise<string> {
    return run("bash", ["-euo", "pipefail", "-c", script], this.dir);
  }

  /** A self-signed CA. */
  async ca(name: string): Promise<void> {
    await this.#key(name);
    await this.openssl(
      "req",
      "-x509",
      "-new",
      "-key",
      `${name}.key`,
      "-out",
      `${name}.crt`,
      "-days",
      "1",
      "-subj",
      `/CN=etcd-edge test ${name}`,
    );
  }

  /** A certificate `ca` issues (or a self-signed one, without `ca`), with a key of its own. */
  async issue(name: string, { subject, ca, extensions = "", days = 1 }: Issue): Promise<void> {
    await this.#key(name);
    writeFileSync(this.path(`${name}.ext`), extensions);
    await this.openssl("req", "-new", "-key", `${name}.key`, "-out", `${name}.csr`, "-subj", subject);
    const files = typeof ca === "string" ? { cert: `${ca}.crt`, key: `${ca}.key` } : ca;
    const signer =
      files === undefined ? ["-signkey", `${name}.key`] : ["-CA", files.cert, "-CAkey", files.key, "-CAcreateserial"];
    await this.openssl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      ...signer,
      "-out",
      `${name}.crt`,
      "-days",
      String(days),
      "-extfile",
      `${name}.ext`,
    );
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  #key(name: string): Promise<string> {
    return this.openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", `${name}.key`);
  }
}
