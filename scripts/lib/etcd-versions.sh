# shellcheck shell=bash
# The etcd versions the real-etcd tests run against, and how this repo gets them without touching the
# system's packages. Sourced by scripts/lib/env.sh (which sets ETCD_EDGE_ROOT); every function returns
# non-zero on failure.
#
#   3.4.23  the system's etcd on PATH (Debian bookworm's etcd-server/etcd-client; see ensure_etcd in env.sh)
#   3.5.16  Debian trixie's etcd-server/etcd-client, downloaded with apt-get into a private apt state under
#           .cache/etcd/ and unpacked there with dpkg-deb: no system package, source list or apt state changes.
#   3.6.x   built with `go build` from etcd's own Go modules at the versions scripts/etcd-go/etcd-<minor>.mod
#   3.7.x   pins (with go.sum beside it): etcd, etcdctl and the Go peer (etcd's client/v3/concurrency), into
#           .cache/etcd/<release>/bin, rebuilt only when those pins, the Go sources or the Go toolchain change.

ETCD_34_VERSION=3.4.23
ETCD_35_VERSION=3.5.16
# The Debian suite that packages ETCD_35_VERSION; its package versions start with "<version>-".
_ETCD_35_SUITE=trixie

# The first line of `etcd --version` ("etcd Version: 3.5.16"), or nothing. Read whole, not through `head`: under
# `set -o pipefail` an early-closed pipe would fail the check with SIGPIPE.
_etcd_version_line() {
  local out
  out="$("$1" --version 2>/dev/null)" || return 1
  echo "${out%%$'\n'*}"
}

_etcd_reports() { # $1: etcd binary, $2: version; true when the binary runs and says it is that version
  [ -x "$1" ] && [ "$(_etcd_version_line "$1")" = "etcd Version: $2" ]
}

# The machine's own Debian mirror (first URIs line of its deb822 sources, else of sources.list).
_debian_mirror() {
  local mirror
  mirror="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && !found { print $2; found = 1 }')"
  [ -n "$mirror" ] || mirror="$(awk '/^deb / && !found { print $2; found = 1 }' /etc/apt/sources.list 2>/dev/null)"
  [ -n "$mirror" ] && echo "$mirror"
}

# Downloads etcd-server and etcd-client of $ETCD_35_VERSION from $_ETCD_35_SUITE and unpacks them into $1.
_fetch_etcd_35_into() {
  local dir="$1" mirror
  command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 || {
    echo "etcd: fetching etcd $ETCD_35_VERSION needs apt-get and dpkg-deb (a Debian-based machine)" >&2
    return 1
  }
  mirror="$(_debian_mirror)" || { echo "etcd: cannot find this machine's Debian mirror in /etc/apt" >&2; return 1; }
  mkdir -p "$dir/apt/state/lists/partial" "$dir/apt/cache/archives/partial" "$dir/apt/sources.d" "$dir/apt/debs"
  cat >"$dir/apt/sources.d/etcd.sources" <<SRC
Types: deb
URIs: $mirror
Suites: $_ETCD_35_SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  # Every path apt reads or writes points into $dir; dpkg's status is only read (to resolve nothing).
  local opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$dir/apt/sources.d"
    -o "Dir::State=$dir/apt/state" -o "Dir::Cache=$dir/apt/cache" -o Dir::State::status=/var/lib/dpkg/status
    -q)
  [ "$(id -u)" -eq 0 ] && opts+=(-o APT::Sandbox::User=root)
  apt-get "${opts[@]}" update >"$dir/apt/update.log" 2>&1 || {
    echo "etcd: apt-get update of $_ETCD_35_SUITE from $mirror failed:" >&2
    tail -n 5 "$dir/apt/update.log" >&2
    return 1
  }
  local pkg version
  for pkg in etcd-server etcd-client; do
    local versions
    versions="$(apt-cache "${opts[@]}" madison "$pkg" 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2 }')" || versions=""
    version="$(awk -v want="$ETCD_35_VERSION-" 'index($0, want) == 1 && !found { print; found = 1 }' <<<"$versions")"
    if [ -z "$version" ]; then
      echo "etcd: $_ETCD_35_SUITE has no $pkg $ETCD_35_VERSION (it has: $(tr '\n' ' ' <<<"$versions"))" >&2
      return 1
    fi
    (cd "$dir/apt/debs" && apt-get "${opts[@]}" download "$pkg=$version" >/dev/null) || {
      echo "etcd: apt-get download $pkg=$version failed" >&2
      return 1
    }
  done
  local deb
  for deb in "$dir"/apt/debs/*.deb; do dpkg-deb -x "$deb" "$dir" || return 1; done
}

# The system's etcd 3.4 (ensure_etcd in env.sh installs Debian's when it may): checks that `etcd` on PATH is
# 3.4 and has etcdctl beside it. Exports ETCD_34_BIN_DIR and prints that directory (the only stdout).
ensure_etcd_34() {
  ensure_etcd >&2 || return 1
  local etcd dir
  etcd="$(command -v etcd)"
  dir="$(dirname "$etcd")"
  local line
  line="$(_etcd_version_line "$etcd")" || line=""
  if [[ "$line" != "etcd Version: 3.4."* ]]; then
    echo "etcd: $etcd is \"$line\", not 3.4 (the etcd-3.4 tests need 3.4, e.g. $ETCD_34_VERSION)" >&2
    return 1
  fi
  [ -x "$dir/etcdctl" ] || { echo "etcd: no etcdctl beside $etcd" >&2; return 1; }
  export ETCD_34_BIN_DIR="$dir"
  echo "$dir"
}

# Makes etcd $ETCD_35_VERSION (etcd, etcdctl, etcdutl) available under .cache/etcd/$ETCD_35_VERSION, fetching
# it once; later calls only check it. Exports ETCD_35_BIN_DIR and prints that directory (the only stdout).
ensure_etcd_35() {
  local cache="$ETCD_EDGE_ROOT/.cache/etcd"
  local dir="$cache/$ETCD_35_VERSION"
  local bin="$dir/usr/bin"
  if ! _etcd_reports "$bin/etcd" "$ETCD_35_VERSION" || ! [ -x "$bin/etcdctl" ]; then
    echo "etcd: fetching etcd $ETCD_35_VERSION (Debian $_ETCD_35_SUITE) into $dir" >&2
    mkdir -p "$cache"
    # Fetch into a private dir and rename it into place: an interrupted or concurrent fetch never leaves a
    # half-unpacked etcd where the tests look.
    local partial
    partial="$(mktemp -d "$cache/.partial-$ETCD_35_VERSION-XXXXXX")" || return 1
    if ! _fetch_etcd_35_into "$partial"; then
      rm -rf "$partial"
      return 1
    fi
    rm -rf "$partial/apt"
    if ! _etcd_reports "$partial/usr/bin/etcd" "$ETCD_35_VERSION"; then
      echo "etcd: the unpacked etcd reports \"$(_etcd_version_line "$partial/usr/bin/etcd")\", not $ETCD_35_VERSION" >&2
      rm -rf "$partial"
      return 1
    fi
    if ! _etcd_reports "$bin/etcd" "$ETCD_35_VERSION"; then
      rm -rf "$dir"
      mv "$partial" "$dir" || { rm -rf "$partial"; return 1; }
    else
      rm -rf "$partial" # another run finished first; its copy is as good
    fi
  fi
  export ETCD_35_BIN_DIR="$bin"
  echo "$bin"
}

# The etcd release a Go-built minor pins ("3.7" -> "3.7.3"), read from its .mod file.
_etcd_go_release() {
  sed -n 's|^[[:space:]]*go.etcd.io/etcd/server/v3 v\([0-9.]*\)$|\1|p' "$ETCD_EDGE_ROOT/scripts/etcd-go/etcd-$1.mod"
}

# What a Go-built member is made from: its pins, the Go sources, and the toolchain. A change to any rebuilds.
_etcd_go_stamp() {
  local src="$ETCD_EDGE_ROOT/scripts/etcd-go"
  {
    go version
    cat "$src/go.mod" "$src/etcd-$1.mod" "$src/etcd-$1.sum"
    find "$src/cmd" -name '*.go' | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -d' ' -f1
}

# Builds (once) etcd, etcdctl and the Go peer of minor $1 (3.6 or 3.7) into .cache/etcd/<release>/bin. Exports
# ETCD_<NN>_BIN_DIR and prints that directory (the only stdout).
_ensure_etcd_go() {
  local minor="$1" release stamp
  local var="ETCD_${minor/./}_BIN_DIR"
  release="$(_etcd_go_release "$minor")"
  [ -n "$release" ] || { echo "etcd: scripts/etcd-go/etcd-$minor.mod pins no go.etcd.io/etcd/server/v3" >&2; return 1; }
  if ! command -v go >/dev/null 2>&1; then
    echo "etcd: building etcd $release needs Go 1.26 or newer (https://go.dev/dl/) and its module proxy" >&2
    return 1
  fi
  stamp="$(_etcd_go_stamp "$minor")" || return 1
  local cache="$ETCD_EDGE_ROOT/.cache/etcd"
  local dir="$cache/$release"
  if ! [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ] || ! _etcd_reports "$dir/bin/etcd" "$release"; then
    echo "etcd: building etcd $release (etcd, etcdctl, the Go peer) from scripts/etcd-go into $dir" >&2
    mkdir -p "$cache"
    local partial
    partial="$(mktemp -d "$cache/.partial-$release-XXXXXX")" || return 1
    # -mod=readonly: the .mod and .sum are the pins; a build that would change them fails instead.
    if ! (cd "$ETCD_EDGE_ROOT/scripts/etcd-go" &&
      go build -mod=readonly -modfile="etcd-$minor.mod" -trimpath -o "$partial/bin/" ./cmd/... >&2); then
      echo "etcd: go build of etcd $release failed" >&2
      rm -rf "$partial"
      return 1
    fi
    if ! _etcd_reports "$partial/bin/etcd" "$release"; then
      echo "etcd: the built etcd reports \"$(_etcd_version_line "$partial/bin/etcd")\", not $release" >&2
      rm -rf "$partial"
      return 1
    fi
    echo "$stamp" >"$partial/stamp"
    rm -rf "$dir"
    mv "$partial" "$dir" || { rm -rf "$partial"; return 1; }
  fi
  export "$var=$dir/bin"
  echo "$dir/bin"
}

ensure_etcd_36() { _ensure_etcd_go 3.6; }
ensure_etcd_37() { _ensure_etcd_go 3.7; }

# Every version the tests run against, for scripts/test.sh and .ci/run: fails when any is missing, and exports
# ETCD_34_BIN_DIR to ETCD_37_BIN_DIR for the test run (test/support/etcd-versions.ts reads them).
ensure_etcd_versions() {
  local dir34 dir35 dir36 dir37
  dir34="$(ensure_etcd_34)" || return 1
  dir35="$(ensure_etcd_35)" || return 1
  dir36="$(ensure_etcd_36)" || return 1
  dir37="$(ensure_etcd_37)" || return 1
  export ETCD_34_BIN_DIR="$dir34" ETCD_35_BIN_DIR="$dir35" ETCD_36_BIN_DIR="$dir36" ETCD_37_BIN_DIR="$dir37"
  echo "env: etcd 3.4 from $dir34, $ETCD_35_VERSION from $dir35, 3.6 from $dir36, 3.7 from $dir37"
}
