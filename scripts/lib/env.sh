# shellcheck shell=bash
# Machine bootstrap shared by scripts/test.sh and .ci/run. Source it; every function returns non-zero on failure.

ETCD_EDGE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MIN_NODE_MAJOR=22
# shellcheck source=scripts/lib/etcd-versions.sh
source "$ETCD_EDGE_ROOT/scripts/lib/etcd-versions.sh"

_node_major() { # $1: node binary; prints its major version, or nothing when it cannot run
  "$1" --version 2>/dev/null | sed -n 's/^v\([0-9][0-9]*\)\..*/\1/p'
}

_node_ok() {
  local major
  major="$(_node_major "$1")"
  [ -n "$major" ] && [ "$major" -ge "$MIN_NODE_MAJOR" ]
}

_as_root() { # runs "$@" as root, or fails when that needs a password
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    return 1
  fi
}

# Makes `node` >= 22 the first on PATH, installing Node 24 into .tools/node24 from the npm registry
# (package node-linux-<arch>) when needed: the registry is reachable where nodejs.org may not be.
ensure_node() {
  local tools="$ETCD_EDGE_ROOT/.tools/node24"
  if command -v node >/dev/null 2>&1 && _node_ok node; then
    echo "env: using node $(node --version) at $(command -v node)"
    return 0
  fi
  if ! _node_ok "$tools/bin/node"; then
    local arch
    case "$(uname -m)" in
      x86_64) arch=x64 ;;
      aarch64 | arm64) arch=arm64 ;;
      *) echo "env: no Node build for $(uname -m); install Node >= $MIN_NODE_MAJOR yourself" >&2; return 1 ;;
    esac
    if ! command -v npm >/dev/null 2>&1; then
      echo "env: need npm to fetch node-linux-$arch@24; install Node >= $MIN_NODE_MAJOR (with npm) first" >&2
      return 1
    fi
    echo "env: installing Node 24 (npm package node-linux-$arch@24) into $tools" >&2
    local tmp tarball
    tmp="$(mktemp -d)"
    if ! tarball="$(cd "$tmp" && npm pack "node-linux-$arch@24" --silent --no-fund --no-audit | tail -n 1)" ||
      ! tar -xzf "$tmp/$tarball" -C "$tmp" package/bin/node; then
      echo "env: downloading node-linux-$arch@24 failed" >&2
      rm -rf "$tmp"
      return 1
    fi
    # Swap in a complete install only, so an interrupted download never leaves a broken node behind.
    rm -rf "$tools"
    mkdir -p "$tools/bin"
    mv "$tmp/package/bin/node" "$tools/bin/node"
    rm -rf "$tmp"
    if ! _node_ok "$tools/bin/node"; then
      echo "env: $tools/bin/node does not run on this machine" >&2
      return 1
    fi
  fi
  export PATH="$tools/bin:$PATH"
  hash -r
  echo "env: using node $(node --version) at $tools/bin/node"
}

# Installs dependencies with `npm ci` when node_modules is missing or older than package-lock.json. The lock
# lists every platform's optional packages (rollup is pinned in `overrides` to a release whose platform
# packages all exist on the registry), so a fresh clone installs exactly what was tested.
ensure_deps() {
  # npm rewrites node_modules/.package-lock.json on every install: a better stamp than the dir's mtime.
  local stamp="$ETCD_EDGE_ROOT/node_modules/.package-lock.json"
  if [ -f "$stamp" ] && ! [ "$ETCD_EDGE_ROOT/package-lock.json" -nt "$stamp" ]; then
    return 0
  fi
  echo "env: installing dependencies (npm ci)"
  (cd "$ETCD_EDGE_ROOT" && npm ci --no-audit --no-fund)
}

# etcd and etcdctl on PATH, from Debian's etcd-server/etcd-client when we may install packages.
ensure_etcd() {
  if command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1; then
    echo "env: using $(etcd --version 2>/dev/null | head -n 1) at $(command -v etcd)"
    return 0
  fi
  if command -v apt-get >/dev/null 2>&1 && _as_root true; then
    echo "env: installing etcd-server and etcd-client with apt-get"
    _as_root apt-get update -qq &&
      _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client || {
      echo "env: apt-get could not install etcd-server etcd-client" >&2
      return 1
    }
    hash -r
    if command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1; then
      echo "env: using $(etcd --version 2>/dev/null | head -n 1) at $(command -v etcd)"
      return 0
    fi
  fi
  cat >&2 <<'MSG'
env: etcd and etcdctl are required (the `etcd` test project runs against real etcd members) but are not on PATH.
  Debian/Ubuntu: sudo apt-get install etcd-server etcd-client
  Elsewhere:     put the etcd and etcdctl binaries (v3.4 or newer) from https://github.com/etcd-io/etcd/releases on PATH
MSG
  return 1
}

# nginx, HAProxy and Caddy on PATH (the proxy-* projects run the suites through each), from Debian's packages
# when we may install them. A missing proxy fails the run: those projects never skip.
ensure_proxies() {
  local missing=() tool
  for tool in nginx haproxy caddy; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  if [ "${#missing[@]}" -gt 0 ] && command -v apt-get >/dev/null 2>&1 && _as_root true; then
    echo "env: installing ${missing[*]} with apt-get"
    _as_root apt-get update -qq &&
      _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
      echo "env: apt-get could not install ${missing[*]}" >&2
    hash -r
    missing=()
    for tool in nginx haproxy caddy; do
      command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
  fi
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "env: ${missing[*]} required (the proxy-* test projects run through them) but not on PATH." >&2
    echo "  Debian/Ubuntu: sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "env: proxies $(nginx -v 2>&1 | sed 's/.*\///'), haproxy $(haproxy -v | sed -n 's/^HAProxy version \([^ ]*\).*/\1/p'), caddy $(caddy version | cut -d' ' -f1)"
}

# The stores the fence tests write to (test/stores): Postgres from Debian's packages, and moto (an S3 and DynamoDB
# emulator, PyPI) in a venv under .cache/stores. SQLite is node:sqlite; D1 and R2 are Miniflare's (npm).
MOTO_VERSION=5.2.5
ensure_stores() {
  if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    if command -v apt-get >/dev/null 2>&1 && _as_root true; then
      echo "env: installing postgresql with apt-get"
      _as_root apt-get update -qq &&
        _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql ||
        echo "env: apt-get could not install postgresql" >&2
    fi
  fi
  if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    echo "env: Postgres required (test/stores fences a table in it) but not installed." >&2
    echo "  Debian/Ubuntu: sudo apt-get install postgresql" >&2
    return 1
  fi
  local venv=.cache/stores/moto
  if ! "$venv/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null; then
    echo "env: installing moto[server]==$MOTO_VERSION into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv" && "$venv/bin/pip" install -q "moto[server]==$MOTO_VERSION" || {
      echo "env: could not install moto (python3-venv and PyPI needed: sudo apt-get install python3-venv)" >&2
      return 1
    }
  fi
  echo "env: stores postgres $(ls /usr/lib/postgresql | sort -V | tail -1), moto $MOTO_VERSION"
}
