#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the lease tests, on 127.0.0.1 only.
#
#   scripts/postgres.sh start    install PostgreSQL 15 from apt if missing, create a cluster in
#                                $CLOCKFLAKE_PG_DIR (a temp dir), start it on a free port
#   scripts/postgres.sh url      print its URL: postgres://postgres@127.0.0.1:PORT/postgres
#   scripts/postgres.sh ca       print the path of the CA certificate of a TLS cluster
#   scripts/postgres.sh halt     stop the server immediately, keep the cluster (outage tests)
#   scripts/postgres.sh resume   start the halted server again on the same port
#   scripts/postgres.sh freeze   SIGSTOP the postmaster and every backend (the kernel still
#                                acknowledges packets, so no socket timeout fires)
#   scripts/postgres.sh thaw     SIGCONT them
#   scripts/postgres.sh stop     stop the server and delete the cluster
#
# CLOCKFLAKE_PG_DIR defaults to /tmp/clockflake-lease-pg. As root the server runs as the
# `postgres` user (runuser); otherwise as the current user.
#
# CLOCKFLAKE_PG_TLS=1 scripts/postgres.sh start: the cluster also speaks TLS (ssl=on), with a
# throwaway CA and a server certificate for CN/SAN `localhost` made by `openssl` (installed
# from apt if missing) in $CLOCKFLAKE_PG_DIR/tls: ca.crt (print its path with `ca`),
# server.crt, server.key. Plain connections are still accepted.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DIR=${CLOCKFLAKE_PG_DIR:-/tmp/clockflake-lease-pg}
PGBIN=/usr/lib/postgresql/15/bin

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

install() {
  if [ -x "$PGBIN/pg_ctl" ] && [ -x "$PGBIN/initdb" ] && id postgres >/dev/null 2>&1; then
    return
  fi
  apt_install "PostgreSQL 15 from apt" postgresql-15
}

install_openssl() {
  command -v openssl >/dev/null && return
  apt_install "openssl from apt" openssl
}

# A CA and a server certificate signed by it, for localhost, in $DIR/tls; ssl=on in the cluster.
enable_tls() {
  install_openssl
  local tls="$DIR/tls"
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=clockflake test CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' \
    >"$tls/server.ext"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 2 -extfile "$tls/server.ext" -out "$tls/server.crt" 2>/dev/null
  chmod 600 "$tls/server.key" "$tls/ca.key"
  chmod 644 "$tls/ca.crt" "$tls/server.crt"
  if [ "$(id -u)" = 0 ]; then chown -R postgres: "$tls"; fi
  printf "ssl = on\nssl_cert_file = '%s'\nssl_key_file = '%s'\n" \
    "$tls/server.crt" "$tls/server.key" >>"$DIR/data/postgresql.conf"
}

server_start() {
  local port
  port=$(cat "$DIR/port")
  as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$DIR -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null
}

is_running() {
  [ -d "$DIR/data" ] && as_pg "$PGBIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1
}

case "${1:-}" in
  start)
    install
    if is_running; then
      echo "postgres.sh: already running in $DIR" >&2
      exit 0
    fi
    rm -rf "$DIR"
    mkdir -p "$DIR"
    chmod 755 "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres: "$DIR"
    as_pg "$PGBIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
    if [ "${CLOCKFLAKE_PG_TLS:-0}" = 1 ]; then enable_tls; fi
    free_port >"$DIR/port.tmp" && mv "$DIR/port.tmp" "$DIR/port"
    server_start
    echo "postgres.sh: PostgreSQL 15 running on 127.0.0.1:$(cat "$DIR/port") (cluster in $DIR)" >&2
    ;;
  url)
    echo "postgres://postgres@127.0.0.1:$(cat "$DIR/port")/postgres"
    ;;
  ca)
    if [ ! -f "$DIR/tls/ca.crt" ]; then
      echo "postgres.sh: no TLS in $DIR (start it with CLOCKFLAKE_PG_TLS=1)" >&2
      exit 1
    fi
    echo "$DIR/tls/ca.crt"
    ;;
  halt)
    as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null
    ;;
  resume)
    server_start
    ;;
  freeze|thaw)
    signal=STOP
    [ "$1" = thaw ] && signal=CONT
    postmaster=$(head -1 "$DIR/data/postmaster.pid")
    for pid in $postmaster $(pgrep -P "$postmaster" || true); do
      kill -s "$signal" "$pid" 2>/dev/null || true
    done
    ;;
  stop)
    if is_running; then
      as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null || true
    fi
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: $0 start|url|ca|halt|resume|freeze|thaw|stop" >&2
    exit 2
    ;;
esac
