#!/usr/bin/env bash
# A throwaway standalone ZooKeeper for the zookeeper:// lease tests, on 127.0.0.1 only.
#
#   scripts/zookeeper.sh start    install Debian's `zookeeper` package if missing, write a config
#                                 and a data dir under $CLOCKFLAKE_ZK_DIR, start the server on a
#                                 free port (or the port of a halted server), wait until it
#                                 answers, print its URL
#   scripts/zookeeper.sh url      print its URL: zookeeper://127.0.0.1:PORT
#   scripts/zookeeper.sh halt     kill the server at once, keep its data and port (outage tests)
#   scripts/zookeeper.sh freeze   SIGSTOP the server (frozen, not gone: sockets stay open)
#   scripts/zookeeper.sh thaw     SIGCONT it
#   scripts/zookeeper.sh stop     kill the server and delete the directory
#
# CLOCKFLAKE_ZK_DIR defaults to /tmp/clockflake-zookeeper. Not the system service: the server
# is a plain java process whose pid is kept in $CLOCKFLAKE_ZK_DIR/pid. Idempotent: `start` on
# a running server prints its URL, `stop` on a stopped one does nothing.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DIR=${CLOCKFLAKE_ZK_DIR:-/tmp/clockflake-zookeeper}
JAR=/usr/share/java/zookeeper.jar

install() {
  if [ -f "$JAR" ] && command -v java >/dev/null \
    && dpkg-query -W -f='${Status}' zookeeper 2>/dev/null | grep -q 'ok installed'; then
    return
  fi
  apt_install "Debian's zookeeper package" --no-install-recommends zookeeper
}

answers() {
  local port reply
  port=$(cat "$DIR/port")
  # `ruok` says imok before the server serves; `srvr` names its mode only once it does.
  reply=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf srvr >&3 && cat <&3" 2>/dev/null || true)
  [[ "$reply" == *"Mode: standalone"* ]]
}

url() {
  echo "zookeeper://127.0.0.1:$(cat "$DIR/port")"
}

server_start() {
  local port
  port=$(cat "$DIR/port")
  # Short ticks so tests can use sessions of a few hundred ms (min = 2 ticks).
  cat >"$DIR/zoo.cfg" <<CFG
tickTime=100
minSessionTimeout=200
maxSessionTimeout=60000
dataDir=$DIR/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,cons
forceSync=no
CFG
  cat >"$DIR/log4j.properties" <<'LOG'
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=${zookeeper.log.file}
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
LOG
  mkdir -p "$DIR/data"
  # setsid: the server outlives the shell that started it and gets no signals meant for it.
  setsid java -Xmx256m -Dzookeeper.log.file="$DIR/server.log" \
    -Dlog4j.configuration="file:$DIR/log4j.properties" \
    -cp "$JAR:/usr/share/java/*" org.apache.zookeeper.server.ZooKeeperServerMain "$DIR/zoo.cfg" \
    >>"$DIR/stdout.log" 2>&1 </dev/null &
  echo $! >"$DIR/pid"
  for _ in $(seq 1 300); do
    if answers; then
      return
    fi
    if ! pid_running; then
      echo "zookeeper.sh: the server exited; its log:" >&2
      tail -n 30 "$DIR/server.log" "$DIR/stdout.log" >&2 || true
      exit 1
    fi
    sleep 0.1
  done
  echo "zookeeper.sh: no answer on 127.0.0.1:$port after 30 s" >&2
  exit 1
}

case "${1:-}" in
  start)
    install
    if pid_running && answers; then
      url
      exit 0
    fi
    server_kill
    if [ ! -f "$DIR/port" ]; then
      rm -rf "$DIR"
      mkdir -p "$DIR"
      free_port >"$DIR/port.tmp" && mv "$DIR/port.tmp" "$DIR/port"
    fi
    server_start
    echo "zookeeper.sh: ZooKeeper running on 127.0.0.1:$(cat "$DIR/port") (data in $DIR)" >&2
    url
    ;;
  url)
    [ -f "$DIR/port" ] || { echo "zookeeper.sh: not started" >&2; exit 1; }
    url
    ;;
  halt | freeze | thaw | stop)
    server_command "$1"
    ;;
  *)
    echo "usage: $0 start|url|halt|freeze|thaw|stop" >&2
    exit 2
    ;;
esac
