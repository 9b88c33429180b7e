import { prefixEnd, toBin, type BinKey } from "./wire/bytes.js";
import { Errors } from "./wire/errors.js";

/** One grant of a user's role: read, write or both, on a key, a range or a prefix. */
export interface Permission {
  /** The key, or with `prefix` every key starting with it. */
  key: string;
  /** Explicit end of [key, rangeEnd); "\0" means every key >= key. Ignored with `prefix`. */
  rangeEnd?: string;
  /** `key` is a prefix: every key starting with it. */
  prefix?: boolean;
  /** What the grant allows. */
  type: "read" | "write" | "readwrite";
}

/** Auth on, as after `etcdctl auth enable`: the users, their grants and the token lifetime. */
export interface AuthOptions {
  /** user → password. */
  users: Record<string, string>;
  /** user → grants. A user not listed here has the root role: every permission, admin calls included. */
  permissions?: Record<string, Permission[]>;
  /** Idle time after which a token stops working, in virtual ms (etcd's --auth-token-ttl, default 300 s). */
  tokenTtlMs?: number;
}

interface Grant {
  begin: BinKey;
  /** "" = unbounded. */
  end: BinKey;
  read: boolean;
  write: boolean;
}

const TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/** etcd's auth store with simple tokens, on the mock's virtual clock. */
export class AuthStore {
  private readonly tokens = new Map<string, { user: string; lastUsed: number }>();
  private readonly grants = new Map<string, Grant[]>();
  private index = 0;
  private readonly ttlMs: number;
  /**
   * The auth store's revision (/v3/auth/status): one per change, counted as etcdctl makes these users from a
   * fresh member (at 1): the root role, then per user `user add` and `user grant-role`, and for a user with grants
   * `role add` and one `role grant-permission` each. `auth enable` leaves it.
   */
  readonly revision: number;

  constructor(
    private readonly options: AuthOptions,
    private readonly now: () => number,
  ) {
    this.ttlMs = options.tokenTtlMs ?? 300_000;
    for (const [user, perms] of Object.entries(options.permissions ?? {})) {
      this.grants.set(user, perms.map(toGrant));
    }
    let revision = 2;
    for (const user of Object.keys(options.users))
      revision += 2 + (this.grants.has(user) ? 1 + this.grants.get(user)!.length : 0);
    this.revision = revision;
  }

  /** Whether the user has the root role (an admin call's permission). */
  isAdmin(user: string | undefined): boolean {
    return user !== undefined && Object.hasOwn(this.options.users, user) && !this.grants.has(user);
  }

  /** A simple token as 3.4 issues it: 16 random letters, a dot, an index. */
  authenticate(name: string, password: string): string {
    if (!Object.hasOwn(this.options.users, name) || this.options.users[name] !== password) throw Errors.authFailed();
    const letters = new Uint8Array(16);
    crypto.getRandomValues(letters);
    const token = `${Array.from(letters, (b) => TOKEN_CHARS[b % TOKEN_CHARS.length]).join("")}.${++this.index}`;
    this.tokens.set(token, { user: name, lastUsed: this.now() });
    return token;
  }

  /** The user behind an Authorization header; undefined when none was sent. Using a token keeps it alive. */
  userOf(token: string | null): string | undefined {
    if (token === null || token === "") return undefined;
    const entry = this.tokens.get(token);
    if (!entry || this.now() - entry.lastUsed >= this.ttlMs) {
      this.tokens.delete(token);
      throw Errors.invalidAuthToken();
    }
    entry.lastUsed = this.now();
    return entry.user;
  }

  /** Throws etcd's error unless `user` may access every key of [key, end) this way. */
  check(user: string | undefined, key: BinKey, end: BinKey, write: boolean): void {
    if (user === undefined) throw Errors.userEmpty();
    const grants = this.grants.get(user);
    if (!grants) return;
    const usable = grants.filter((g) => (write ? g.write : g.read));
    if (!covered(usable, key, end)) throw Errors.permissionDenied();
  }

  expireTokens(): void {
    this.tokens.clear();
  }
}

function toGrant(p: Permission): Grant {
  const begin = toBin(p.key);
  const end = p.prefix ? prefixEnd(begin) : p.rangeEnd === undefined ? "" : toBin(p.rangeEnd);
  return {
    begin,
    // A single key is the interval [key, key+"\0").
    end: end === "" ? `${begin}\0` : end === "\0" ? "" : end,
    read: p.type !== "write",
    write: p.type !== "read",
  };
}

/** Whether the union of grants covers [key, end) (a point when end is "", everything >= key when "\0"). */
function covered(grants: readonly Grant[], key: BinKey, end: BinKey): boolean {
  const want = end === "" ? `${key}\0` : end === "\0" ? "" : end;
  let pos = key;
  const sorted = [...grants].sort((a, b) => (a.begin < b.begin ? -1 : a.begin > b.begin ? 1 : 0));
  for (const g of sorted) {
    if (g.begin > pos) break;
    if (g.end === "") return true;
    if (g.end > pos) pos = g.end;
    if (want !== "" && pos >= want) return true;
  }
  return false;
}
