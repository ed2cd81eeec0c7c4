#!/usr/bin/env bash
# make bench-postgres-extension: clockflake.next_id() beside its peers in one run on one
# throwaway PostgreSQL 15 cluster (defaults: fsync and synchronous_commit on), the extension
# preloaded with a file:// lease. In turns: ROUNDS rounds, each running every peer once in an
# order rotated by one per round, so that a change in the machine's load falls on every peer
# alike; the tables give each cell's median and its ratio to the reference's median.
#
#   pgbench -M prepared, 1 and 8 clients, SECONDS each: SELECT of each generator
#     (clockflake.next_id(), nextval('s'), gen_random_uuid(); uuidv7() on PostgreSQL 18 and
#     pgEdge's snowflake.nextval() when the server has them)
#   INSERT ... SELECT of ROWS rows into a table keyed by each: time, table and index sizes
#
# Expects the extension installed (make install-postgres-extension).
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
SECONDS_EACH=${CLOCKFLAKE_PGEXT_BENCH_SECONDS:-5}
ROUNDS=${CLOCKFLAKE_PGEXT_BENCH_ROUNDS:-5}
INSERT_ROUNDS=${CLOCKFLAKE_PGEXT_BENCH_INSERT_ROUNDS:-3}
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
# Ids are refused (never waited for) until the lease worker holds its lease.
until [ "$(sql -At -c "SELECT state FROM clockflake.lease_status()")" = active ]; do sleep 0.1; done

queries=("SELECT clockflake.next_id()" "SELECT nextval('s')" "SELECT gen_random_uuid()")
keys=("bigint PRIMARY KEY DEFAULT clockflake.next_id()" "bigserial PRIMARY KEY"
  "uuid PRIMARY KEY DEFAULT gen_random_uuid()")
if [ "$(sql -At -c "SELECT count(*) FROM pg_proc WHERE proname = 'uuidv7'")" != 0 ]; then
  queries+=("SELECT uuidv7()")
  keys+=("uuid PRIMARY KEY DEFAULT uuidv7()")
fi
if sql -c "CREATE EXTENSION snowflake" 2>/dev/null; then
  queries+=("SELECT snowflake.nextval()")
  keys+=("bigint PRIMARY KEY DEFAULT snowflake.nextval()")
fi

# Every measurement is a line "kind<TAB>name<TAB>value" in $DIR/results.tsv.
: >"$DIR/results.tsv"
for round in $(seq 1 "$ROUNDS"); do
  count=${#queries[@]}
  for at in $(seq 0 $((count - 1))); do
    query=${queries[$(((at + round) % count))]}
    echo "$query;" >"$DIR/query.sql"
    for clients in 1 8; do
      tps=$("$PGBIN/pgbench" -n -M prepared -h 127.0.0.1 -p "$PORT" -U postgres -c "$clients" \
        -j "$clients" -T "$SECONDS_EACH" -f "$DIR/query.sql" postgres 2>/dev/null \
        | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
      printf 'select%s\t%s\t%s\n' "$clients" "$query" "$tps" >>"$DIR/results.tsv"
    done
  done
  echo "round $round of $ROUNDS: SELECTs done" >&2
done

for round in $(seq 1 "$INSERT_ROUNDS"); do
  count=${#keys[@]}
  for at in $(seq 0 $((count - 1))); do
    key=${keys[$(((at + round) % count))]}
    sql -c "DROP TABLE IF EXISTS t" -c "CREATE TABLE t (id $key, n integer NOT NULL)" -c "CHECKPOINT"
    ms=$(sql -At -c "\\timing on" -c "INSERT INTO t (n) SELECT g FROM generate_series(1, $ROWS) AS g" \
      | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
    printf 'insert\t%s\t%s\n' "$key" "$ms" >>"$DIR/results.tsv"
    printf 'table\t%s\t%s\n' "$key" "$(sql -At -c "SELECT pg_table_size('t')")" >>"$DIR/results.tsv"
    printf 'index\t%s\t%s\n' "$key" "$(sql -At -c "SELECT pg_indexes_size('t')")" >>"$DIR/results.tsv"
  done
  echo "round $round of $INSERT_ROUNDS: INSERTs done" >&2
done

python3 - "$DIR/results.tsv" "$ROUNDS" "$INSERT_ROUNDS" "$SECONDS_EACH" "$ROWS" <<'EOF'
import statistics
import sys
from collections import defaultdict

path, rounds, insert_rounds, seconds, rows = sys.argv[1:]
cells = defaultdict(list)
order = defaultdict(list)
for line in open(path):
    kind, name, value = line.rstrip("\n").split("\t")
    cells[(kind, name)].append(float(value))
    if name not in order[kind]:
        order[kind].append(name)


def median(kind, name):
    return statistics.median(cells[(kind, name)])


def spread(kind, name):
    values = cells[(kind, name)]
    return f"{min(values):,.0f}-{max(values):,.0f}"


print(f"SELECT, pgbench -M prepared, {seconds} s per run, {rounds} rounds in turns: median tps"
      " (min-max), ratio to nextval('s') at the same client count")
print("| query | 1 client | ratio | 8 clients | ratio |")
print("|---|---:|---:|---:|---:|")
reference = "SELECT nextval('s')"
# clockflake's first, then the peers as they first ran.
for name in sorted(order["select1"], key=lambda name: "clockflake" not in name):
    row = [f"`{name}`"]
    for clients in ("select1", "select8"):
        value = median(clients, name)
        row += [f"{value:,.0f} ({spread(clients, name)})",
                f"{value / median(clients, reference):.2f}x"]
    print("| " + " | ".join(row) + " |")
print()
print(f"INSERT of {int(rows):,} rows in one statement, {insert_rounds} rounds in turns: median time"
      " (min-max), ratio to bigserial, table and index sizes")
print("| key | time | ratio | table | index |")
print("|---|---:|---:|---:|---:|")
reference = "bigserial PRIMARY KEY"
for name in sorted(order["insert"], key=lambda name: "clockflake" not in name):
    value = median("insert", name)
    print(f"| `{name}` | {value:,.0f} ms ({spread('insert', name)}) "
          f"| {value / median('insert', reference):.2f}x "
          f"| {median('table', name) / 2**20:.0f} MB | {median('index', name) / 2**20:.0f} MB |")
EOF
