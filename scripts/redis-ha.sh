#!/usr/bin/env bash
# A throwaway Redis primary with one replica, on 127.0.0.1 only, for the failover tests
# (lease/tests/redis_failover.rs).
#
#   scripts/redis-ha.sh start          install Debian's redis-server if missing; a primary and a
#                                      replica of it (REPLICAOF) in $CLOCKFLAKE_REDIS_HA_DIR, on
#                                      free ports, the replica in sync before it returns
#   scripts/redis-ha.sh primary-url | replica-url   redis://:PASSWORD@127.0.0.1:PORT/0
#   scripts/redis-ha.sh cut            the replica stops receiving the primary's writes (it follows
#                                      an address where nobody answers), keeping what it has
#   scripts/redis-ha.sh kill-primary   kill -9 the primary
#   scripts/redis-ha.sh promote        REPLICAOF NO ONE on the replica
#   scripts/redis-ha.sh stop           both killed, the directory deleted
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DIR=${CLOCKFLAKE_REDIS_HA_DIR:-/tmp/clockflake-redis-ha}
PASSWORD=clockflake-redis-test

install() {
  if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
    return
  fi
  apt_install "Debian's redis-server package" --no-install-recommends redis-server redis-tools
}

cli() {
  local name=$1
  shift
  REDISCLI_AUTH=$PASSWORD redis-cli -h 127.0.0.1 -p "$(cat "$DIR/$name.port")" "$@"
}

start_server() {
  local name=$1
  shift
  mkdir -p "$DIR/$name"
  redis-server --bind 127.0.0.1 --port "$(cat "$DIR/$name.port")" --dir "$DIR/$name" \
    --requirepass "$PASSWORD" --masterauth "$PASSWORD" --save "" --appendonly no \
    --daemonize yes --pidfile "$DIR/$name.pid" --logfile "$DIR/$name.log" "$@"
  for _ in $(seq 100); do cli "$name" ping 2>/dev/null | grep -q PONG && return; sleep 0.1; done
  echo "redis-ha.sh: $name did not answer" >&2
  exit 1
}

kill_server() {
  kill_pid_file "$DIR/$1.pid"
}

url() {
  echo "redis://:$PASSWORD@127.0.0.1:$(cat "$DIR/$1.port")/0"
}

case "${1:-}" in
  start)
    install
    kill_server primary
    kill_server replica
    rm -rf "$DIR"
    mkdir -p "$DIR"
    free_port >"$DIR/primary.port"
    free_port >"$DIR/replica.port"
    start_server primary
    start_server replica --replicaof 127.0.0.1 "$(cat "$DIR/primary.port")"
    for _ in $(seq 100); do
      cli replica info replication | grep -q 'master_link_status:up' && break
      sleep 0.1
    done
    cli replica info replication | grep -q 'master_link_status:up' \
      || { echo "redis-ha.sh: the replica is not in sync" >&2; exit 1; }
    echo "redis-ha.sh: Redis primary on $(cat "$DIR/primary.port"), replica on $(cat "$DIR/replica.port")" >&2
    ;;
  primary-url) url primary ;;
  replica-url) url replica ;;
  cut)
    # Port 1 on loopback: nobody answers, the replica keeps its data and waits.
    cli replica replicaof 127.0.0.1 1 >/dev/null
    ;;
  kill-primary) kill_server primary ;;
  promote) cli replica replicaof no one >/dev/null ;;
  stop)
    kill_server primary
    kill_server replica
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: $0 start|primary-url|replica-url|cut|kill-primary|promote|stop" >&2
    exit 2
    ;;
esac
