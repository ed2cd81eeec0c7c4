#!/usr/bin/env bash
# make bench-postgres-extension: clockflake.next_id() beside nextval() and gen_random_uuid(), in
# one run on one throwaway PostgreSQL 15 cluster (defaults: fsync and synchronous_commit on),
# the extension preloaded with a file:// lease.
#
#   pgbench -M prepared, 1 and 8 clients, SECONDS each: SELECT of each generator
#   INSERT ... SELECT of ROWS rows into a table keyed by each: time, table and index sizes
#
# Expects the extension installed (make install-postgres-extension).
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
SECONDS_EACH=${CLOCKFLAKE_PGEXT_BENCH_SECONDS:-10}
ROWS=${CLOCKFLAKE_PGEXT_BENCH_ROWS:-1000000}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/clockflake-pgext-bench.XXXXXX")

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
trap 'as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
if [ "$(id -u)" = 0 ]; then chown postgres: "$DIR"; fi
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_pg "$PGBIN/initdb" -D "$DIR/data" -U postgres -A trust --no-sync >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 -o "-c listen_addresses=127.0.0.1 \
  -p $PORT -c unix_socket_directories=$DIR -c shared_preload_libraries=clockflake \
  -c clockflake.lease='file://$DIR/leases?app=bench'" start >/dev/null
sql() { PGOPTIONS='-c client_min_messages=warning' "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres -d postgres "$@"; }
sql -c "CREATE EXTENSION clockflake" -c "CREATE SEQUENCE s"

echo "SELECT, pgbench -M prepared, ${SECONDS_EACH} s each (transactions per second):"
printf '%-30s %12s %12s\n' query "1 client" "8 clients"
for query in "SELECT clockflake.next_id()" "SELECT nextval('s')" "SELECT gen_random_uuid()"; do
  echo "$query;" >"$DIR/query.sql"
  row=$(printf '%-30s' "$query")
  for clients in 1 8; do
    tps=$("$PGBIN/pgbench" -n -M prepared -h 127.0.0.1 -p "$PORT" -U postgres -c "$clients" \
      -j "$clients" -T "$SECONDS_EACH" -f "$DIR/query.sql" postgres 2>/dev/null \
      | sed -n 's/^tps = \([0-9]*\).*/\1/p')
    row+=$(printf ' %12s' "$tps")
  done
  echo "$row"
done

echo
echo "INSERT of $ROWS rows in one statement:"
printf '%-50s %10s %12s %12s\n' key "ms" "table" "index"
for key in "bigint PRIMARY KEY DEFAULT clockflake.next_id()" "bigserial PRIMARY KEY" \
  "uuid PRIMARY KEY DEFAULT gen_random_uuid()"; do
  sql -c "DROP TABLE IF EXISTS t" -c "CREATE TABLE t (id $key, n integer NOT NULL)"
  ms=$(sql -At -c "\\timing on" -c "INSERT INTO t (n) SELECT g FROM generate_series(1, $ROWS) AS g" \
    | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
  table=$(sql -At -c "SELECT pg_size_pretty(pg_table_size('t'))")
  index=$(sql -At -c "SELECT pg_size_pretty(pg_indexes_size('t'))")
  printf '%-50s %10s %12s %12s\n' "$key" "${ms%.*}" "$table" "$index"
done
