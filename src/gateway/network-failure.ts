/**
 * Why a fetch failed, in plain words, read from what the runtime put on the error: Node's and Bun's `code`s
 * (undici's own for etcd-edge/node), Deno's messages. Each runtime nests the reason differently (Node two
 * `cause`s deep, Bun on the error itself), so the whole chain is searched.
 */
export interface NetworkFailure {
  /** The reason, for a request to `endpoint`: "connection refused (ECONNREFUSED)". */
  why(endpoint: string): string;
  /** The request provably never reached the server (so a write was not applied and may be sent again). */
  unsent: boolean;
  /** The runtime refuses the request itself, and will again: sending it again is pointless. */
  permanent: boolean;
}

const UNSENT = ": nothing was sent";
const BAD_PORT = 'fetch refuses this port, a "bad port" of the Fetch standard';
const PLAIN =
  ": is this etcd's plain-HTTP port? Use http://, or serve TLS with etcd's --cert-file and --key-file " +
  "(etcd-edge's docs/tls.md)";
const CA = ": give the fetch its CA (etcd-edge's docs/tls.md)";
const CERT =
  ": etcd demands one with --client-cert-auth and whenever --trusted-ca-file is set, signed by that CA, " +
  "with the clientAuth extended key usage (etcd-edge's docs/tls.md)";

/**
 * What a failure is called, tested on `code: message` of each error of the chain, most specific first;
 * whether it proves the request unsent (a refused certificate is refused before the request goes); and what
 * to do about it.
 */
const RULES: Array<[test: RegExp, words: string, unsent?: boolean, hint?: string]> = [
  [/\bbad port\b|port \d+ are blocked/i, BAD_PORT, true, UNSENT],
  [/ECONNREFUSED|connection refused/i, "connection refused", true],
  // Node's and undici's words when a plain-HTTP server (etcd's client port without --cert-file) drops the hello.
  [
    /before secure TLS connection was established/i,
    "the server hung up before any TLS handshake: the endpoint may not speak TLS",
    true,
    PLAIN,
  ],
  [/ENOTFOUND|EAI_AGAIN|EAI_NONAME|dns error/i, "unknown host (DNS)", true],
  [/CONNECT_TIMEOUT|^ETIMEDOUT: connect|Connection timed out/i, "connecting timed out", true],
  [/WRONG_VERSION_NUMBER|TOO_LONG|InvalidContentType/i, "TLS handshake failed: the endpoint may not speak TLS", true],
  // Bun's one code for a failed handshake.
  [/^EPROTO/, "TLS handshake failed: the endpoint may not speak TLS, or refused the client certificate", true, CERT],
  [/SELF_SIGNED|self[- ]signed|CaUsedAsEndEntity/i, "TLS: the server certificate is self-signed, untrusted", true, CA],
  [/ALTNAME_INVALID|not valid for name/i, "TLS: the server certificate is for another host name", true],
  [/^CERT_HAS_EXPIRED|certificate expired/i, "TLS: the server certificate has expired", true],
  [/UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|UnknownIssuer/i, "TLS: the server certificate's CA is untrusted", true, CA],
  [/CERTIFICATE_REQUIRED|CertificateRequired/i, "TLS: the server demands a client certificate", true, CERT],
  [
    /ALERT_(BAD|UNSUPPORTED|HANDSHAKE|UNKNOWN_CA)|BadCertificate|HandshakeFailure/i,
    "TLS: the server refused the client certificate, or its absence",
    true,
    CERT,
  ],
  [/^(ERR_TLS_|CERT_|UNABLE_TO_)|invalid peer certificate/i, "TLS: the server certificate was refused", true],
  [/^ERR_SSL_/, "TLS failed"],
  // Reset before undici had the connection: the request was never written.
  [/^ECONNRESET: connect/, "the connection was reset", true],
  [/ECONNRESET|EPIPE|reset by peer|broken pipe/i, "the connection was reset"],
  [/UND_ERR_SOCKET|other side closed|connection closed|socket hang up|closed unexpectedly/i, "the server hung up"],
];

/** What became of a request whose fetch threw `error`. */
export function networkFailure(error: unknown): NetworkFailure {
  const links: string[] = [];
  for (let at = error; typeof at === "object" && at !== null && links.length < 6; ) {
    const { code, message, cause } = at as { code?: unknown; message?: unknown; cause?: unknown };
    links.push(`${typeof code === "string" ? code : ""}: ${String(message)}`);
    at = cause;
  }
  for (const [test, words, unsent = false, hint = ""] of RULES) {
    const link = links.find((l) => test.test(l));
    if (link !== undefined) {
      // The runtime's own words, briefly: its code, or its message without Deno's request preamble.
      const said = link.startsWith(": ") ? link.slice(2).replace(/^.*\(Connect\): /s, "") : link.split(":")[0]!;
      // A TLS server also hangs up on a client without the certificate it demands.
      const tls = (endpoint: string) =>
        !unsent && endpoint.startsWith("https:") ? `; so does a missing client certificate${CERT}` : "";
      const why = (endpoint: string) => `${words} (${said.slice(0, 120)})${hint}${tls(endpoint)}`;
      return { why, unsent, permanent: words === BAD_PORT };
    }
  }
  // Unknown: the outer message and the innermost, where the runtime put the reason.
  const outer = String((error as { message?: unknown } | undefined)?.message ?? error);
  const inner = links.at(-1)?.replace(/^[^:]*: /, "");
  const why = () => (inner === undefined || inner === outer ? outer : `${outer}: ${inner}`);
  return { why, unsent: false, permanent: false };
}
