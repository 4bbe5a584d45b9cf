#!/usr/bin/env bash
# Install pgvector for the newest PostgreSQL server under /usr/lib/postgresql (what the tests'
# throwaway clusters run), for the pack stores' search by meaning on PostgreSQL.
#
# Debian's postgresql-NN-pgvector when the configured suites have it; otherwise (bookworm has
# none) pgvector's Debian source package from $PGVECTOR_SUITE (default trixie), fetched with a
# private apt configuration (the system's sources stay as they are) and built with PGXS against
# postgresql-server-dev-NN. Needs root and apt-get; does nothing when pgvector is installed.
set -euo pipefail

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ]; then
    echo "install-pgvector: no PostgreSQL server under /usr/lib/postgresql; skipped" >&2
    exit 0
fi
pg_config="$bindir/pg_config"
version=$(basename "$(dirname "$bindir")")
sharedir="/usr/share/postgresql/$version"
[ -f "$sharedir/extension/vector.control" ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: install pgvector for PostgreSQL $version (postgresql-$version-pgvector) for" \
         "the pack store's PostgreSQL vector tests" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if apt-get install -y --no-install-recommends "postgresql-$version-pgvector" 2>/dev/null; then
    exit 0
fi

suite=${PGVECTOR_SUITE:-trixie}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "==> building pgvector for PostgreSQL $version from Debian's $suite source package"
apt-get install -y --no-install-recommends "postgresql-server-dev-$version" make gcc
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
# the Debian mirror this machine already uses (its main archive), for the other suite's sources
mirror=$(grep -hoE '^(URIs:[[:space:]]*|deb[[:space:]]+)[a-z]+://[^[:space:]]+/debian/?([[:space:]]|$)' \
         /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
         | grep -oE '[a-z]+://[^[:space:]]+' | head -n 1 || true)
if [ -z "$mirror" ]; then
    echo "install-pgvector: no Debian archive in the apt sources; install pgvector by hand" >&2
    exit 0
fi
echo "deb-src ${mirror%/} $suite main" > "$work/sources.list"
apt_private=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=/dev/null"
             -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache")
apt-get "${apt_private[@]}" update
(cd "$work" && apt-get "${apt_private[@]}" source --download-only pgvector)
tar -xzf "$work"/pgvector_*.orig.tar.gz -C "$work"
src=$(ls -d "$work"/pgvector-*/ | head -n 1)
make -C "$src" PG_CONFIG="$pg_config" OPTFLAGS=""
make -C "$src" PG_CONFIG="$pg_config" install
