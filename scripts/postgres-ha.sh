#!/usr/bin/env bash
# A throwaway PostgreSQL 15 primary with one streaming replica, on 127.0.0.1 only, for the
# failover tests (lease/tests/postgres_failover.rs).
#
#   scripts/postgres-ha.sh start async|sync   install PostgreSQL 15 from apt if missing; a primary in
#                                 $CLOCKFLAKE_PG_HA_DIR/primary and a replica made from it by
#                                 pg_basebackup -R in .../replica, each on a free port.
#                                 sync: synchronous_standby_names names the replica and
#                                 synchronous_commit = remote_apply (a commit returns once the
#                                 replica has applied it); async: neither (pg_basebackup's default)
#   scripts/postgres-ha.sh primary-url | replica-url    postgres://postgres@127.0.0.1:PORT/postgres
#   scripts/postgres-ha.sh cut        SIGSTOP the primary's walsenders: the replica receives nothing
#                                 more (an asynchronous replica falls behind; a synchronous
#                                 primary's commits wait)
#   scripts/postgres-ha.sh freeze-primary   SIGSTOP the primary's postmaster and backends (a
#                                 paused VM: its kernel still accepts connections)
#   scripts/postgres-ha.sh kill-primary   the primary stops at once (kill -9, a frozen one too)
#   scripts/postgres-ha.sh promote    the replica becomes a primary (pg_ctl promote -w): a new timeline
#   scripts/postgres-ha.sh stop       both stopped, the directory deleted
#
# CLOCKFLAKE_PG_HA_DIR defaults to /tmp/clockflake-pg-ha. As root the servers run as `postgres`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DIR=${CLOCKFLAKE_PG_HA_DIR:-/tmp/clockflake-pg-ha}
PGBIN=/usr/lib/postgresql/15/bin

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

install() {
  if [ -x "$PGBIN/pg_ctl" ] && [ -x "$PGBIN/pg_basebackup" ] && id postgres >/dev/null 2>&1; then
    return
  fi
  apt_install "PostgreSQL 15 from apt" postgresql-15
}

# server_start NAME: starts $DIR/NAME on the port in $DIR/NAME.port.
server_start() {
  local name=$1
  as_pg "$PGBIN/pg_ctl" -D "$DIR/$name" -l "$DIR/$name.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $(cat "$DIR/$name.port") -c unix_socket_directories=$DIR" \
    start >/dev/null
}

server_stop() {
  local name=$1 postmaster
  if [ -f "$DIR/$name/postmaster.pid" ]; then
    # Frozen walsenders (cut) must not hold the shutdown, nor a frozen server (freeze-primary).
    postmaster=$(head -1 "$DIR/$name/postmaster.pid")
    for pid in $(pgrep -P "$postmaster" -f walsender || true); do kill -9 "$pid" 2>/dev/null || true; done
    for pid in "$postmaster" $(pgrep -P "$postmaster" || true); do kill -CONT "$pid" 2>/dev/null || true; done
  fi
  if [ -d "$DIR/$name" ] && as_pg "$PGBIN/pg_ctl" -D "$DIR/$name" status >/dev/null 2>&1; then
    as_pg "$PGBIN/pg_ctl" -D "$DIR/$name" -m immediate -w stop >/dev/null || true
  fi
}

url() {
  echo "postgres://postgres@127.0.0.1:$(cat "$DIR/$1.port")/postgres"
}

case "${1:-}" in
  start)
    mode=${2:-async}
    install
    server_stop primary
    server_stop replica
    rm -rf "$DIR"
    mkdir -p "$DIR"
    chmod 755 "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres: "$DIR"
    as_pg "$PGBIN/initdb" -D "$DIR/primary" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
    {
      echo "max_connections = 200"
      echo "fsync = off"
      echo "full_page_writes = off"
      echo "wal_level = replica"
      echo "max_wal_senders = 4"
      echo "wal_keep_size = '256MB'"
      if [ "$mode" = sync ]; then
        echo "synchronous_standby_names = 'replica'"
        echo "synchronous_commit = remote_apply"
      fi
    } | as_pg tee -a "$DIR/primary/postgresql.conf" >/dev/null
    free_port >"$DIR/primary.port"
    server_start primary
    free_port >"$DIR/replica.port"
    as_pg "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$(cat "$DIR/primary.port")" -U postgres \
      -D "$DIR/replica" -R -X stream --no-sync
    # The replica's name is what synchronous_standby_names matches (application_name).
    echo "primary_conninfo = 'host=127.0.0.1 port=$(cat "$DIR/primary.port") user=postgres application_name=replica'" \
      | as_pg tee -a "$DIR/replica/postgresql.auto.conf" >/dev/null
    server_start replica
    # Streaming before any test writes: the replica shows up in pg_stat_replication.
    for _ in $(seq 100); do
      state=$(as_pg "$PGBIN/psql" -h "$DIR" -p "$(cat "$DIR/primary.port")" -U postgres -Atc \
        "SELECT state FROM pg_stat_replication WHERE application_name = 'replica'" 2>/dev/null || true)
      [ "$state" = streaming ] && break
      sleep 0.1
    done
    [ "$state" = streaming ] || { echo "postgres-ha.sh: the replica is not streaming" >&2; exit 1; }
    echo "postgres-ha.sh: PostgreSQL 15 primary on $(cat "$DIR/primary.port"), $mode replica on $(cat "$DIR/replica.port") ($DIR)" >&2
    ;;
  primary-url) url primary ;;
  replica-url) url replica ;;
  cut)
    postmaster=$(head -1 "$DIR/primary/postmaster.pid")
    for pid in $(pgrep -P "$postmaster" -f walsender || true); do kill -STOP "$pid"; done
    ;;
  freeze-primary)
    # SIGSTOP the primary's postmaster and every backend (a paused VM): its kernel still
    # accepts connections, and nothing answers them.
    postmaster=$(head -1 "$DIR/primary/postmaster.pid")
    kill -STOP "$postmaster"
    for pid in $(pgrep -P "$postmaster" || true); do kill -STOP "$pid"; done
    ;;
  kill-primary)
    # kill -9, children first: a stopped walsender is killed before it can send anything more.
    postmaster=$(head -1 "$DIR/primary/postmaster.pid")
    for pid in $(pgrep -P "$postmaster" || true); do kill -9 "$pid" 2>/dev/null || true; done
    kill -9 "$postmaster" 2>/dev/null || true
    while kill -0 "$postmaster" 2>/dev/null; do sleep 0.02; done
    ;;
  promote)
    as_pg "$PGBIN/pg_ctl" -D "$DIR/replica" -w -t 30 promote >/dev/null
    ;;
  stop)
    server_stop primary
    server_stop replica
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: $0 start async|sync|primary-url|replica-url|cut|freeze-primary|kill-primary|promote|stop" >&2
    exit 2
    ;;
esac
