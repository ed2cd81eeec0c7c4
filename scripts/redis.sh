#!/usr/bin/env bash
# A throwaway Redis for the redis:// lease tests, on 127.0.0.1 only, with a password, a plain
# port and (when openssl is there) a TLS port whose certificate a throwaway CA signs.
#
#   scripts/redis.sh start    install Debian's redis-server if missing, start a server with its
#                             data in $CLOCKFLAKE_REDIS_DIR on free ports, wait until it answers,
#                             print its URL
#   scripts/redis.sh url      print its URL: redis://:PASSWORD@127.0.0.1:PORT/0
#   scripts/redis.sh url-tls  print its TLS URL: rediss://:PASSWORD@127.0.0.1:PORT/0?cacert=CA
#                             (nothing if the server has no TLS port)
#   scripts/redis.sh halt     kill the server at once (SIGKILL), keep its data and ports
#   scripts/redis.sh resume   start the halted server again on the same ports
#   scripts/redis.sh freeze   SIGSTOP the server (frozen, not gone: sockets stay open)
#   scripts/redis.sh thaw     SIGCONT it
#   scripts/redis.sh stop     kill the server and delete the directory
#
# The server persists every write before answering it (appendonly yes, appendfsync always, no
# RDB snapshots): a halt loses no grant and no reservation, as a durable deployment would.
# CLOCKFLAKE_REDIS_DIR defaults to /tmp/clockflake-redis. Not the system service: a plain
# redis-server whose pid is in $CLOCKFLAKE_REDIS_DIR/pid. Idempotent: `start` on a running
# server prints its URL, `stop` on a stopped one does nothing.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DIR=${CLOCKFLAKE_REDIS_DIR:-/tmp/clockflake-redis}
PASSWORD=clockflake-redis-test

install() {
  if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
    return
  fi
  apt_install "Debian's redis-server package" --no-install-recommends redis-server redis-tools
}

# A CA and a server certificate for 127.0.0.1 and localhost, valid for a day.
make_certs() {
  command -v openssl >/dev/null || return 0
  local tls=$DIR/tls
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=clockflake test CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >"$tls/ext.cnf"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 1 -extfile "$tls/ext.cnf" -out "$tls/server.crt" 2>/dev/null
  free_port >"$DIR/tls-port"
}

server_start() {
  local port tls_args=()
  port=$(cat "$DIR/port")
  if [ -f "$DIR/tls-port" ]; then
    tls_args=(--tls-port "$(cat "$DIR/tls-port")" --tls-cert-file "$DIR/tls/server.crt"
      --tls-key-file "$DIR/tls/server.key" --tls-ca-cert-file "$DIR/tls/ca.crt"
      --tls-auth-clients no)
  fi
  redis-server --bind 127.0.0.1 --port "$port" --dir "$DIR" --requirepass "$PASSWORD" \
    --save "" --appendonly yes --appendfsync always --maxclients 1000 \
    --daemonize yes --pidfile "$DIR/pid" --logfile "$DIR/server.log" "${tls_args[@]}"
  local tries=0
  until REDISCLI_AUTH=$PASSWORD redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ]; then
      echo "redis.sh: the server did not answer; its log:" >&2
      cat "$DIR/server.log" >&2 || true
      exit 1
    fi
    sleep 0.1
  done
}

url() {
  echo "redis://:$PASSWORD@127.0.0.1:$(cat "$DIR/port")/0"
}

case "${1:-}" in
  start)
    install
    if pid_running; then
      url
      exit 0
    fi
    rm -rf "$DIR"
    mkdir -p "$DIR"
    free_port >"$DIR/port"
    make_certs
    server_start
    echo "redis.sh: Redis running on 127.0.0.1:$(cat "$DIR/port") (data in $DIR)" >&2
    url
    ;;
  url)
    url
    ;;
  url-tls)
    if [ -f "$DIR/tls-port" ]; then
      echo "rediss://:$PASSWORD@127.0.0.1:$(cat "$DIR/tls-port")/0?cacert=$DIR/tls/ca.crt"
    fi
    ;;
  resume)
    server_start
    ;;
  halt | freeze | thaw | stop)
    server_command "$1"
    ;;
  *)
    echo "usage: $0 start|url|url-tls|halt|resume|freeze|thaw|stop" >&2
    exit 2
    ;;
esac
