#!/usr/bin/env bash
# The extension on a real PostgreSQL 15 (make test-postgres-extension): throwaway clusters in a
# temp dir, run as `postgres` when root (initdb refuses root), always stopped and deleted.
#
#   tests/run.sh    expects the extension installed (make install-postgres-extension)
#
# 1. preloaded, worker id 5: CREATE EXTENSION; decode round-trips; next_ids strictly increase;
#    every refusal has its SQLSTATE and clockflake code (tests/sql/api.sql); pg_dump and restore
#    1b. the migration recipe (docs/recipes/postgresql-migration.md), each in a database of its
#    own: a bigserial key with 1000 rows (and an identity column) moved to
#    DEFAULT clockflake.next_id(), new ids above every old one, none twice, foreign keys kept
#    (tests/sql/migrate-bigserial.sql); a uuid key swapped for bigint ids in creation order,
#    the table pointing at it moved over (tests/sql/migrate-uuid.sql)
#    1c. ids from next_id() and next_ids() decoded by the Python package (.venv, from
#    make build-python) and the npm package (bindings-node, from make build-js), each skipped
#    when not built: the same time, clock sequence, worker id and sequence as
#    clockflake.decode (and again in 8, on ids of two clock sequences and a leased worker id)
# 2. eight pgbench connections inserting DEFAULT clockflake.next_id() into a table whose key is
#    the id: 0 duplicates, every row there, ids strictly increasing per connection
# 3. a streaming standby of it refuses next_id() (25006) and still decodes
# 4. restarted without a worker id: next_id() refuses (55000), decode still works
# 5. restarted without shared_preload_libraries: LOAD and CREATE EXTENSION fail with the message
#    that says how to load it
# 6. an unknown clockflake.layout: the server refuses to start, UNKNOWN_LAYOUT in its log
# 7. leased worker ids (clockflake.lease = file://): two servers on one lease directory get
#    different worker ids, and pgbench on both at once makes no id twice; a server whose lease
#    worker stops refuses ids (LEASE_LOST); after a restart it leases again and goes on above
#    every id it made
# 8. kill -9 of the postmaster while 4 connections insert (leased), restarted with the clock an
#    hour behind (libfaketime on the postmaster): the orphaned backends stop issuing, and the
#    restarted server resumes from the lease's marks in another clock sequence: 0 duplicates
# 9. a streaming replica of a leased primary leases nothing while in recovery; the primary is
#    killed while 4 connections insert, the replica promoted: its lease worker takes the worker
#    id over from the stored record, and no id it makes is one the old primary made (the old
#    primary's data, started alone afterwards, holds every id it committed)
# 10. the lease's lock file removed by hand: the lease is lost, and leased again without a
#    restart (clockflake.lease_status(): one loss, one heal); no id twice
# 11. a server restarted with another layout than the lease's record was written with: no id,
#    INVALID_STATE
# 12. leased from another PostgreSQL server (postgres://, TTL 2 s): a pool whose every worker id
#    is held by others refuses ids (55P03, WORKER_POOL_EXHAUSTED) until one is freed, then leases
#    without a restart; under load (4 sessions), the coordinator frozen (SIGSTOP) past the TTL:
#    ids refused with 55P03 COORDINATOR_UNAVAILABLE, none past the deadline; a newcomer takes
#    worker id 0 meanwhile; the server leases again (another worker id) without a restart:
#    no id twice among every one kept
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/clockflake-pgext.XXXXXX")
CLIENTS=8
TRANSACTIONS=${CLOCKFLAKE_PGEXT_TRANSACTIONS:-2000}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_all() {
  for data in "$DIR"/*/data; do
    [ -d "$data" ] && as_pg "$PGBIN/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true
  done
  rm -rf "$DIR"
}
trap stop_all EXIT

if [ "$(id -u)" = 0 ]; then chown postgres: "$DIR"; fi
chmod 755 "$DIR"

# new_cluster NAME: an initialised cluster in $DIR/NAME, its port in $DIR/NAME/port.
new_cluster() {
  local name=$1
  as_pg mkdir -p "$DIR/$name"
  as_pg "$PGBIN/initdb" -D "$DIR/$name/data" -U postgres -A trust --no-sync >/dev/null
  free_port >"$DIR/$name/port"
}

# start NAME [-c setting=value ...]: starts the cluster on its port, sockets in its folder.
start() {
  local name=$1
  shift
  local port
  port=$(cat "$DIR/$name/port")
  # START_ENV: variables for the server (libfaketime's), through env(1).
  # shellcheck disable=SC2086
  as_pg env ${START_ENV:-} "$PGBIN/pg_ctl" -D "$DIR/$name/data" -l "$DIR/$name/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$DIR/$name -c fsync=off -c synchronous_commit=off -c full_page_writes=off $*" \
    start >/dev/null
}

stop() {
  as_pg "$PGBIN/pg_ctl" -D "$DIR/$1/data" -m fast -w stop >/dev/null
}

# sql NAME [psql args...]: psql on the cluster, stopping at the first error.
sql() {
  local name=$1
  shift
  "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cat "$DIR/$name/port")" -U postgres \
    -d "${DB:-postgres}" "$@"
}

# until_true NAME SQL [SECONDS]: polls SQL on the cluster until it gives t (at most SECONDS,
# default 60; errors count as not yet).
until_true() {
  local name=$1 query=$2 limit=${3:-60} started=$SECONDS
  until [ "$(sql "$name" -At -c "$query" 2>/dev/null)" = t ]; do
    if [ $((SECONDS - started)) -ge "$limit" ]; then
      echo "FAIL: $name: not true after $limit s: $query" >&2
      sql "$name" -c "SELECT * FROM clockflake.lease_status()" >&2 || true
      exit 1
    fi
    sleep 0.1
  done
}

# wait_leased NAME: until the server's lease worker holds a lease, or has failed an attempt
# (ids are refused, never waited for, until it holds one).
wait_leased() {
  until_true "$1" "SELECT state = 'active' OR failed_attempts > 0 FROM clockflake.lease_status()"
}

# expect_error NAME SQL SQLSTATE TEXT: the statement fails with that SQLSTATE and TEXT in its
# message, detail or hint.
expect_error() {
  local name=$1 statement=$2 sqlstate=$3 text=$4 out
  if out=$(sql "$1" -v VERBOSITY=verbose -c "$statement" 2>&1); then
    echo "FAIL: expected $sqlstate from: $statement" >&2
    exit 1
  fi
  if ! grep -q "ERROR:  $sqlstate:" <<<"$out" || ! grep -qF "$text" <<<"$out"; then
    echo "FAIL: expected $sqlstate and '$text' from: $statement; got:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "ok: $statement -> $sqlstate ($(grep -m1 'ERROR:' <<<"$out" | cut -c1-110))"
}

# decoded_alike NAME IDS: the ids IDS (a query) selects, decoded by clockflake.decode on the
# cluster, decode the same in the Python package (the repository's .venv, from make
# build-python) and the npm package (bindings-node/lib, from make build-js): the same ms, clock
# sequence, worker id and sequence. Each is skipped, saying so, when it is not built.
decoded_alike() {
  local name=$1 ids=$2 layout
  layout=$(sql "$name" -At -c "SHOW clockflake.layout")
  sql "$name" -At -F ' ' -c "
    SELECT made.id, (extract(epoch FROM d.ts) * 1000)::bigint, d.clock_seq, d.worker_id, d.sequence
      FROM ($ids) AS made (id), clockflake.decode(made.id) AS d" >"$DIR/decoded.txt"
  echo "   $(wc -l <"$DIR/decoded.txt") ids, layout $layout, clock sequences" \
    "$(cut -d' ' -f3 "$DIR/decoded.txt" | sort -u | tr '\n' ' ')worker ids" \
    "$(cut -d' ' -f4 "$DIR/decoded.txt" | sort -u | tr '\n' ' ')sequences" \
    "$(cut -d' ' -f5 "$DIR/decoded.txt" | sort -n | sed -n '1p;$p' | tr '\n' ' ')"
  if [ -x "$PYTHON" ] && "$PYTHON" -c "import clockflake" 2>/dev/null; then
    "$PYTHON" - "$DIR/decoded.txt" "$layout" <<'EOF'
import sys

from clockflake import decode

path, layout = sys.argv[1:]
rows = [line.split() for line in open(path)]
assert rows, "no ids"
for id_text, *in_sql in rows:
    parts = decode(int(id_text), layout)
    in_python = [parts.timestamp_ms, parts.clock_seq, parts.worker_id, parts.sequence]
    in_sql = [int(value) for value in in_sql]
    if in_python != in_sql:
        sys.exit(f"FAIL: id {id_text}: clockflake.decode in SQL gives {in_sql}, Python {in_python}")
print(f"ok: Python decodes the {len(rows)} ids as clockflake.decode does")
EOF
  else
    echo "skipped: Python, no clockflake in $PYTHON (make build-python puts it there)"
  fi
  if [ -f "$NODE_PACKAGE/lib/index.cjs" ] && command -v node >/dev/null; then
    node - "$DIR/decoded.txt" "$layout" "$NODE_PACKAGE" <<'EOF'
const fs = require('node:fs');
const [path, layout, nodePackage] = process.argv.slice(2);
const { decode } = require(nodePackage);
const rows = fs.readFileSync(path, 'utf8').trim().split('\n').map((line) => line.split(' '));
for (const [idText, ...inSql] of rows) {
  const parts = decode(BigInt(idText), layout);
  const inJs = [parts.timestampMs, parts.clockSeq, parts.workerId, parts.sequence].join(' ');
  if (inJs !== inSql.join(' ')) {
    console.error(`FAIL: id ${idText}: clockflake.decode in SQL gives ${inSql.join(' ')}, JS ${inJs}`);
    process.exit(1);
  }
}
console.log(`ok: JavaScript decodes the ${rows.length} ids as clockflake.decode does`);
EOF
  else
    echo "skipped: JavaScript, no $NODE_PACKAGE/lib (make build-js builds it)"
  fi
}
PYTHON="$HERE/../../.venv/bin/python"
NODE_PACKAGE=$(cd "$HERE/../../bindings-node" && pwd)

PRELOAD="-c shared_preload_libraries=clockflake -c clockflake.worker_id_unleased=5"

echo "== 1. the SQL API (worker id 5, layout clockseq)"
new_cluster primary
# A standby will be cloned from it.
printf "host replication postgres 127.0.0.1/32 trust\n" | as_pg tee -a "$DIR/primary/data/pg_hba.conf" >/dev/null
start primary "$PRELOAD" -c wal_level=replica -c max_wal_senders=4
sql primary -f "$HERE/sql/api.sql"
echo "ok: tests/sql/api.sql"
# pg_dump and restore: the extension comes back by CREATE EXTENSION, the DEFAULT with it.
sql primary -c "CREATE DATABASE restored"
"$PGBIN/pg_dump" -h 127.0.0.1 -p "$(cat "$DIR/primary/port")" -U postgres -d postgres \
  | DB=restored sql primary >/dev/null
result=$(DB=restored sql primary -At -c "
  INSERT INTO api_t (note) VALUES ('after a restore');
  SELECT count(*), count(DISTINCT id), pg_get_expr(adbin, adrelid) FROM api_t, pg_attrdef
   WHERE adrelid = 'api_t'::regclass GROUP BY 3")
test "$result" = "2|2|clockflake.next_id()" || { echo "FAIL: after pg_dump and restore: $result" >&2; exit 1; }
echo "ok: pg_dump and restore keep the extension and the DEFAULT"

echo "== 1b. the migration recipe: from bigserial and from uuid to DEFAULT clockflake.next_id()"
sql primary -c "CREATE DATABASE migrate_bigserial" -c "CREATE DATABASE migrate_uuid"
# The page's check prints the sequence's name and 't' (every old id below the new ones).
result=$(DB=migrate_bigserial sql primary -At -f "$HERE/sql/migrate-bigserial.sql" | tr '\n' ' ')
test "$result" = "public.orders_id_seq t " || {
  echo "FAIL: migrate-bigserial.sql printed '$result', expected 'public.orders_id_seq t '" >&2
  exit 1
}
echo "ok: bigserial (1000 rows) and identity keys: 1000 new ids above the old ones, none twice"
DB=migrate_uuid sql primary -f "$HERE/sql/migrate-uuid.sql"
echo "ok: uuid key: bigint ids in creation order, the referencing table moved, uuids kept"

echo "== 1c. ids from the extension decode the same in Python and JavaScript"
decoded_alike primary "SELECT clockflake.next_id() UNION ALL SELECT clockflake.next_ids(1000)"

echo "== 2. $CLIENTS connections x $TRANSACTIONS inserts with DEFAULT clockflake.next_id()"
sql primary -c "CREATE TABLE ids (id bigint PRIMARY KEY DEFAULT clockflake.next_id(),
  client integer NOT NULL, ord bigserial NOT NULL)"
printf 'INSERT INTO ids (client) VALUES (:client_id);\n' >"$DIR/insert.sql"
"$PGBIN/pgbench" -n -h 127.0.0.1 -p "$(cat "$DIR/primary/port")" -U postgres \
  -c "$CLIENTS" -j "$CLIENTS" -t "$TRANSACTIONS" -f "$DIR/insert.sql" postgres >"$DIR/pgbench.log" 2>&1 \
  || { cat "$DIR/pgbench.log" >&2; exit 1; }
grep -E "number of (transactions actually processed|failed)|tps" "$DIR/pgbench.log" | sed 's/^/   /'
result=$(sql primary -At -c "
  SELECT count(*), count(DISTINCT id), count(DISTINCT client),
    (SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY client ORDER BY ord) AS before
      FROM ids) AS s WHERE id <= before),
    (SELECT count(*) FROM ids WHERE (clockflake.decode(id)).worker_id <> 5)
  FROM ids")
expected="$((CLIENTS * TRANSACTIONS))|$((CLIENTS * TRANSACTIONS))|$CLIENTS|0|0"
if [ "$result" != "$expected" ]; then
  echo "FAIL: rows|distinct ids|clients|ids not increasing per client|other worker = $result, expected $expected" >&2
  exit 1
fi
echo "ok: rows|distinct ids|clients|not increasing|other worker = $result"

echo "== 3. a streaming standby refuses to issue ids"
as_pg mkdir -p "$DIR/standby"
free_port >"$DIR/standby/port"
as_pg "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$(cat "$DIR/primary/port")" -U postgres \
  -D "$DIR/standby/data" -R -X stream --no-sync --checkpoint=fast
start standby "$PRELOAD" -c hot_standby=on
until [ "$(sql standby -At -c 'SELECT pg_is_in_recovery()')" = t ]; do sleep 0.2; done
expect_error standby "SELECT clockflake.next_id()" 25006 "cannot issue ids during recovery"
expect_error standby "SELECT * FROM clockflake.next_ids(3)" 25006 "cannot issue ids during recovery"
test "$(sql standby -At -c "SELECT (clockflake.decode(max(id))).worker_id FROM ids")" = 5
echo "ok: the standby decodes"
stop standby

echo "== 4. no worker id configured"
stop primary
start primary -c shared_preload_libraries=clockflake
expect_error primary "SELECT clockflake.next_id()" 55000 "no worker id is configured"
test "$(sql primary -At -c "SELECT count(*) FROM ids WHERE (clockflake.decode(id)).worker_id = 5")" \
  = "$((CLIENTS * TRANSACTIONS))"
echo "ok: decode works without a worker id"
stop primary

echo "== 5. loaded without shared_preload_libraries"
start primary
expect_error primary "LOAD 'clockflake'" 55000 "clockflake must be loaded through shared_preload_libraries"
sql primary -c "CREATE DATABASE fresh"
DB=fresh expect_error primary "CREATE EXTENSION clockflake" 55000 "clockflake must be loaded through shared_preload_libraries"
expect_error primary "SELECT clockflake.next_id()" 55000 "shared_preload_libraries = 'clockflake'"
stop primary

echo "== 6. an unknown layout stops the server from starting"
rm -f "$DIR/primary/server.log"
if start primary -c shared_preload_libraries=clockflake -c clockflake.layout=nope 2>/dev/null; then
  echo "FAIL: the server started with clockflake.layout = nope" >&2
  exit 1
fi
grep -q "UNKNOWN_LAYOUT" "$DIR/primary/server.log" || {
  echo "FAIL: no UNKNOWN_LAYOUT in the server log:" >&2
  tail -5 "$DIR/primary/server.log" >&2
  exit 1
}
echo "ok: $(grep -m1 'FATAL\|ERROR' "$DIR/primary/server.log" | cut -c1-120)"

echo "== 7. leased worker ids (file://)"
LEASE="-c shared_preload_libraries=clockflake -c clockflake.lease='file://$DIR/leases?app=test'"
start primary "$LEASE"
new_cluster second
start second "$LEASE"
sql second -c "CREATE EXTENSION clockflake"
wait_leased primary
wait_leased second
worker_primary=$(sql primary -At -c "SELECT (clockflake.decode(clockflake.next_id())).worker_id")
worker_second=$(sql second -At -c "SELECT (clockflake.decode(clockflake.next_id())).worker_id")
if [ "$worker_primary" = "$worker_second" ]; then
  echo "FAIL: both servers leased worker id $worker_primary" >&2
  exit 1
fi
echo "ok: worker ids $worker_primary and $worker_second"
for name in primary second; do
  sql "$name" -c "CREATE TABLE leased (id bigint PRIMARY KEY DEFAULT clockflake.next_id(),
    client integer NOT NULL, ord bigserial NOT NULL)"
done
printf 'INSERT INTO leased (client) VALUES (:client_id);\n' >"$DIR/insert-leased.sql"
for name in primary second; do
  "$PGBIN/pgbench" -n -h 127.0.0.1 -p "$(cat "$DIR/$name/port")" -U postgres -c 4 -j 4 \
    -t "$TRANSACTIONS" -f "$DIR/insert-leased.sql" postgres >"$DIR/pgbench-$name.log" 2>&1 &
done
wait %1 && wait %2 || { cat "$DIR"/pgbench-*.log >&2; exit 1; }
sql second -c "COPY leased (id, client, ord) TO STDOUT" \
  | sql primary -c "CREATE TABLE leased_second (LIKE leased)" -c "COPY leased_second FROM STDIN"
result=$(sql primary -At -c "
  SELECT (SELECT count(*) FROM leased) + (SELECT count(*) FROM leased_second),
    (SELECT count(DISTINCT id) FROM (SELECT id FROM leased UNION ALL SELECT id FROM leased_second) AS a),
    (SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY client ORDER BY ord) AS before
      FROM leased) AS s WHERE id <= before)")
expected="$((8 * TRANSACTIONS))|$((8 * TRANSACTIONS))|0"
if [ "$result" != "$expected" ]; then
  echo "FAIL: rows|distinct ids|not increasing = $result, expected $expected" >&2
  exit 1
fi
echo "ok: two leased servers, rows|distinct ids|not increasing = $result"
# The lease worker connects to no database: find it among the postmaster's children.
lease_worker=$(pgrep -P "$(head -1 "$DIR/primary/data/postmaster.pid")" -f 'clockflake lease')
kill -TERM "$lease_worker"
while kill -0 "$lease_worker" 2>/dev/null; do sleep 0.1; done
expect_error primary "SELECT clockflake.next_id()" 55000 "LEASE_LOST"
test "$(sql primary -At -c "SELECT state FROM clockflake.lease_status()")" = stopped
stop primary
start primary "$LEASE"
wait_leased primary
result=$(sql primary -At -c "SELECT (clockflake.decode(clockflake.next_id())).worker_id,
  clockflake.next_id() > (SELECT max(id) FROM leased)")
test "$result" = "$worker_primary|t" || { echo "FAIL: after a restart: $result" >&2; exit 1; }
echo "ok: restarted, worker id $worker_primary again, ids above every earlier one"
stop second

echo "== 8. kill -9 of the postmaster under load, restarted with the clock an hour behind"
sql primary -c "CREATE TABLE crash (id bigint PRIMARY KEY DEFAULT clockflake.next_id(),
  client integer NOT NULL)"
printf 'INSERT INTO crash (client) VALUES (:client_id);\n' >"$DIR/insert-crash.sql"
postmaster=$(head -1 "$DIR/primary/data/postmaster.pid")
"$PGBIN/pgbench" -n -h 127.0.0.1 -p "$(cat "$DIR/primary/port")" -U postgres -c 4 -j 4 -T 30 \
  -f "$DIR/insert-crash.sql" postgres >"$DIR/pgbench-crash.log" 2>&1 &
pgbench_pid=$!
until [ "$(sql primary -At -c "SELECT count(*) >= 2000 FROM crash")" = t ]; do sleep 0.2; done
children=$(pgrep -P "$postmaster" | tr '\n' ' ')
kill -KILL "$postmaster"
# An orphaned backend goes on serving its connection until it notices the postmaster is gone
# (then it exits), or until the lease worker, which notices it within 100 ms, stops ids and
# gives the worker id back: then its next insert fails with LEASE_LOST. Either way pgbench ends.
wait "$pgbench_pid" && { echo "FAIL: pgbench went on after the postmaster died" >&2; exit 1; }
how=$(grep -m1 -o "lease lost\|postmaster exit\|closed the connection unexpectedly" \
  "$DIR/pgbench-crash.log") || {
  echo "FAIL: pgbench ended without a refusal or a closed connection:" >&2
  tail -5 "$DIR/pgbench-crash.log" >&2
  exit 1
}
echo "ok: the orphaned backends stopped ($how)"
for pid in $children; do
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
done
rm -f "$DIR/primary/data/postmaster.pid" # the killed postmaster's, every process of it gone
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
START_ENV="LD_PRELOAD=$FAKETIME_LIB FAKETIME=-1h DONT_FAKE_MONOTONIC=1" start primary "$LEASE"
wait_leased primary
behind=$(sql primary -At -c "SELECT round(extract(epoch FROM now()))::bigint")
if [ $(( $(date +%s) - behind )) -lt 3500 ]; then
  echo "FAIL: the restarted server's clock is not an hour behind (libfaketime)" >&2
  exit 1
fi
rows_before=$(sql primary -At -c "SELECT count(*) FROM crash")
"$PGBIN/pgbench" -n -h 127.0.0.1 -p "$(cat "$DIR/primary/port")" -U postgres -c 4 -j 4 -t 500 \
  -f "$DIR/insert-crash.sql" postgres >"$DIR/pgbench-after.log" 2>&1 \
  || { cat "$DIR/pgbench-after.log" >&2; exit 1; }
result=$(sql primary -At -c "
  SELECT count(*), count(DISTINCT id),
    count(DISTINCT (clockflake.decode(id)).clock_seq),
    max((clockflake.decode(id)).ts) - min((clockflake.decode(id)).ts) > interval '50 minutes'
  FROM crash")
expected="$((rows_before + 2000))|$((rows_before + 2000))|2|t"
if [ "$result" != "$expected" ]; then
  echo "FAIL: rows|distinct|clock sequences|an hour apart = $result, expected $expected" >&2
  exit 1
fi
echo "ok: $rows_before rows before the crash, 2000 after with the clock an hour behind: \
rows|distinct|clock sequences|an hour apart = $result"
decoded_alike primary "(SELECT id FROM crash ORDER BY id LIMIT 500)
  UNION ALL (SELECT id FROM crash ORDER BY id DESC LIMIT 500)"
stop primary

echo "== 9. a leased primary killed under load, its streaming replica promoted"
start primary "$LEASE"
wait_leased primary
sql primary -c "CREATE TABLE failover (id bigint PRIMARY KEY DEFAULT clockflake.next_id(),
  client integer NOT NULL)"
as_pg mkdir -p "$DIR/replica"
free_port >"$DIR/replica/port"
as_pg "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$(cat "$DIR/primary/port")" -U postgres \
  -D "$DIR/replica/data" -R -X stream --no-sync --checkpoint=fast
start replica "$LEASE" -c hot_standby=on
until [ "$(sql replica -At -c 'SELECT pg_is_in_recovery()')" = t ]; do sleep 0.2; done
if pgrep -P "$(head -1 "$DIR/replica/data/postmaster.pid")" -f 'clockflake lease' >/dev/null; then
  echo "FAIL: the replica runs a lease worker while in recovery" >&2
  exit 1
fi
expect_error replica "SELECT clockflake.next_id()" 25006 "cannot issue ids during recovery"
printf 'INSERT INTO failover (client) VALUES (:client_id);\n' >"$DIR/insert-failover.sql"
postmaster=$(head -1 "$DIR/primary/data/postmaster.pid")
"$PGBIN/pgbench" -n -h 127.0.0.1 -p "$(cat "$DIR/primary/port")" -U postgres -c 4 -j 4 -T 30 \
  -f "$DIR/insert-failover.sql" postgres >"$DIR/pgbench-failover.log" 2>&1 &
pgbench_pid=$!
until [ "$(sql replica -At -c "SELECT count(*) >= 2000 FROM failover")" = t ]; do sleep 0.2; done
children=$(pgrep -P "$postmaster" | tr '\n' ' ')
kill -KILL "$postmaster"
wait "$pgbench_pid" || true
for pid in $children; do
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
done
rm -f "$DIR/primary/data/postmaster.pid"
as_pg "$PGBIN/pg_ctl" -D "$DIR/replica/data" -w promote >/dev/null
until_true replica "SELECT state = 'active' FROM clockflake.lease_status()"
"$PGBIN/pgbench" -n -h 127.0.0.1 -p "$(cat "$DIR/replica/port")" -U postgres -c 4 -j 4 -t 500 \
  -f "$DIR/insert-failover.sql" postgres >"$DIR/pgbench-promoted.log" 2>&1 \
  || { cat "$DIR/pgbench-promoted.log" >&2; exit 1; }
replicated=$(sql replica -At -c "SELECT count(*) - 2000 FROM failover")
# The old primary's data, alone (no preload, no lease): every id it committed.
start primary
sql primary -c "COPY failover (id) TO STDOUT" \
  | sql replica -c "CREATE TABLE old_primary (id bigint)" -c "COPY old_primary FROM STDIN"
result=$(sql replica -At -c "
  SELECT (SELECT count(*) FROM old_primary) >= $replicated,
    (SELECT count(*) FROM failover f JOIN old_primary o USING (id)) = $replicated,
    (SELECT count(*) FROM failover) = (SELECT count(DISTINCT id) FROM failover)")
if [ "$result" != "t|t|t" ]; then
  echo "FAIL: old primary holds the replicated rows|the promoted server's ids are new|distinct = $result" >&2
  exit 1
fi
echo "ok: $replicated rows replicated, $(sql primary -At -c 'SELECT count(*) FROM failover') \
committed on the old primary, 2000 made after the promotion: none repeats an old one"
stop primary

echo "== 10. the lease's lock file removed by hand: ids stop, and the server leases again"
sql replica -c "CREATE TABLE relocked (id bigint PRIMARY KEY DEFAULT clockflake.next_id())" \
  -c "INSERT INTO relocked SELECT FROM generate_series(1, 1000)"
worker=$(sql replica -At -c "SELECT worker_id FROM clockflake.lease_status()")
rm "$DIR/leases/test/worker-$worker.lock"
until_true replica "SELECT heals = 1 AND state = 'active' FROM clockflake.lease_status()"
grep -q "the lease on worker id $worker is lost" "$DIR/replica/server.log" || {
  echo "FAIL: no loss of worker id $worker in the server log" >&2
  exit 1
}
result=$(sql replica -At -c "INSERT INTO relocked SELECT FROM generate_series(1, 1000)" \
  -c "SELECT count(*), count(DISTINCT id), (SELECT losses FROM clockflake.lease_status())
        FROM relocked")
test "$result" = "2000|2000|1" || { echo "FAIL: rows|distinct|losses = $result" >&2; exit 1; }
echo "ok: lost (its lock file gone), leased again without a restart (worker id" \
  "$(sql replica -At -c "SELECT worker_id FROM clockflake.lease_status()")): rows|distinct|losses = $result"
stop replica

echo "== 11. restarted with another layout than the lease's records"
start replica "$LEASE" -c clockflake.layout=twitter
until_true replica "SELECT failed_attempts > 0 FROM clockflake.lease_status()"
expect_error replica "SELECT clockflake.next_id()" 55000 "clockflake code: INVALID_STATE"
stop replica

echo "== 12. leased from another PostgreSQL server (postgres://): a full pool, a frozen coordinator"
new_cluster coord
start coord
COORD="postgres://postgres@127.0.0.1:$(cat "$DIR/coord/port")/postgres?sslmode=disable&ttl=2s"
start primary -c shared_preload_libraries=clockflake -c "clockflake.lease='$COORD&app=heal'"
wait_leased primary
test "$(sql primary -At -c "SELECT state || ' ' || worker_id || ' ' || coordinator
  FROM clockflake.lease_status()")" = "active 0 ${COORD%%\?*}?app=heal"
echo "ok: worker id 0 leased from $(sql primary -At -c "SELECT coordinator FROM clockflake.lease_status()")"
# Every worker id of the app 'full' held by someone else (live rows, never used: epoch 0).
sql coord -c "INSERT INTO clockflake_leases (app, worker_id, owner, expires_at)
  SELECT 'full', g, 'another host', now() + interval '1 hour' FROM generate_series(0, 127) AS g"
start second -c shared_preload_libraries=clockflake -c "clockflake.lease='$COORD&app=full'"
wait_leased second
expect_error second "SELECT clockflake.next_id()" 55P03 "clockflake code: WORKER_POOL_EXHAUSTED"
sql coord -c "UPDATE clockflake_leases SET owner = NULL, expires_at = NULL
  WHERE app = 'full' AND worker_id = 7"
until_true second "SELECT state = 'active' FROM clockflake.lease_status()"
test "$(sql second -At -c "SELECT (clockflake.decode(clockflake.next_id())).worker_id")" = 7
echo "ok: a full pool refused (55P03, WORKER_POOL_EXHAUSTED); worker id 7 freed, leased without a restart"
stop second
# Load on the leased server: 4 sessions inserting (each insert its own transaction), a refusal
# recorded with its SQLSTATE and DETAIL instead of ending the session.
sql primary -c "CREATE TABLE healed (id bigint PRIMARY KEY DEFAULT clockflake.next_id(),
    client integer NOT NULL)" \
  -c "CREATE TABLE refused (sqlstate text, detail text)" -c "CREATE TABLE stop_load ()" \
  -c "CREATE PROCEDURE load(client integer) LANGUAGE plpgsql AS \$\$
      DECLARE state text; detail text;
      BEGIN
        WHILE NOT EXISTS (SELECT FROM stop_load) LOOP
          BEGIN
            INSERT INTO healed (client) VALUES (client);
          EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
            INSERT INTO refused VALUES (state, detail);
            PERFORM pg_sleep(0.01);
          END;
          COMMIT;
        END LOOP;
      END \$\$"
loaders=()
for client in 1 2 3 4; do
  sql primary -c "CALL load($client)" &
  loaders+=($!)
done
until_true primary "SELECT count(*) >= 500 FROM healed"
coord_pids="$(head -1 "$DIR/coord/data/postmaster.pid") $(pgrep -P "$(head -1 "$DIR/coord/data/postmaster.pid")" | tr '\n' ' ')"
# shellcheck disable=SC2086
kill -STOP $coord_pids
# The lease's deadline, fixed from now on (no renewal reaches the coordinator).
deadline_ms=$(sql primary -At -c "SELECT round(extract(epoch FROM deadline) * 1000)
  FROM clockflake.lease_status()")
test -n "$deadline_ms" || { echo "FAIL: no deadline while the lease is held" >&2; exit 1; }
until_true primary "SELECT count(*) > 0 FROM refused" 30
expect_error primary "SELECT clockflake.next_id()" 55P03 "clockflake code: COORDINATOR_UNAVAILABLE"
# The lease worker paused (not the server) while the coordinator is thawed, so that a newcomer
# takes worker id 0 first; the coordinator lets go of it once its TTL has passed.
lease_worker=$(pgrep -P "$(head -1 "$DIR/primary/data/postmaster.pid")" -f 'clockflake lease')
kill -STOP "$lease_worker"
# shellcheck disable=SC2086
kill -CONT $coord_pids
until_true coord "SELECT count(*) = 0 FROM clockflake_leases WHERE app = 'heal' AND expires_at > now()"
# ... and worker id 0's marks are behind the clock, so that a newcomer prefers it (a worker id
# whose record it can use at once, the lowest first).
until_true coord "SELECT max(mark) < extract(epoch FROM now()) * 1000
  FROM clockflake_leases, unnest(high_water_ms) AS mark WHERE app = 'heal' AND worker_id = 0"
start second -c shared_preload_libraries=clockflake -c "clockflake.lease='$COORD&app=heal'"
wait_leased second
test "$(sql second -At -c "SELECT worker_id FROM clockflake.lease_status()")" = 0 \
  || { echo "FAIL: the newcomer did not take worker id 0" >&2; exit 1; }
sql second -c "CREATE TABLE healed (id bigint PRIMARY KEY DEFAULT clockflake.next_id(),
    client integer NOT NULL)"
printf 'INSERT INTO healed (client) VALUES (:client_id);\n' >"$DIR/insert-healed.sql"
"$PGBIN/pgbench" -n -h 127.0.0.1 -p "$(cat "$DIR/second/port")" -U postgres -c 2 -j 2 -t 500 \
  -f "$DIR/insert-healed.sql" postgres >"$DIR/pgbench-newcomer.log" 2>&1 \
  || { cat "$DIR/pgbench-newcomer.log" >&2; exit 1; }
kill -CONT "$lease_worker"
until_true primary "SELECT state = 'active' AND heals = 1 FROM clockflake.lease_status()"
healed_worker=$(sql primary -At -c "SELECT worker_id FROM clockflake.lease_status()")
until_true primary "SELECT count(*) >= 500 FROM healed WHERE (clockflake.decode(id)).worker_id = $healed_worker"
sql primary -c "INSERT INTO stop_load DEFAULT VALUES"
for pid in "${loaders[@]}"; do wait "$pid"; done
sql second -c "COPY healed (id) TO STDOUT" \
  | sql primary -c "CREATE TABLE newcomer (id bigint)" -c "COPY newcomer FROM STDIN"
result=$(sql primary -At -c "
  SELECT (SELECT count(*) FROM healed) + (SELECT count(*) FROM newcomer)
       = (SELECT count(DISTINCT id) FROM (SELECT id FROM healed UNION ALL SELECT id FROM newcomer) AS a),
    (SELECT max(extract(epoch FROM (clockflake.decode(id)).ts) * 1000) FROM healed
      WHERE (clockflake.decode(id)).worker_id = 0) <= $deadline_ms + 5,
    (SELECT count(*) FROM refused WHERE sqlstate <> '55P03'
       OR detail <> 'clockflake code: COORDINATOR_UNAVAILABLE'),
    (SELECT count(*) FROM newcomer WHERE (clockflake.decode(id)).worker_id <> 0)")
if [ "$result" != "t|t|0|0" ]; then
  echo "FAIL: distinct|nothing past the deadline|other refusals|newcomer off worker id 0 = $result" >&2
  sql primary -c "SELECT sqlstate, detail, count(*) FROM refused GROUP BY 1, 2" >&2
  exit 1
fi
echo "ok: $(sql primary -At -c "SELECT count(*) FROM healed") ids on the leased server" \
  "(worker ids 0 then $healed_worker), $(sql primary -At -c "SELECT count(*) FROM refused")" \
  "refused with 55P03 COORDINATOR_UNAVAILABLE while lost, 1000 by the newcomer on worker id 0:" \
  "none twice, none past the deadline"
stop second
stop primary
stop coord

echo "postgres-extension: every test passed"
