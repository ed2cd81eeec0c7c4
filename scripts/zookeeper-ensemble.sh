#!/usr/bin/env bash
# A throwaway three-server ZooKeeper ensemble on 127.0.0.1, for the failover tests
# (lease/tests/zookeeper_ensemble.rs).
#
#   scripts/zookeeper-ensemble.sh start      install Debian's zookeeper if missing; servers 1, 2, 3
#                                            in $CLOCKFLAKE_ZK_ENSEMBLE_DIR/N on free ports, until a
#                                            quorum serves; prints the URL naming all three
#   scripts/zookeeper-ensemble.sh url        zookeeper://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#   scripts/zookeeper-ensemble.sh leader     the number of the server that leads now
#   scripts/zookeeper-ensemble.sh follower   the number of a server that follows now
#   scripts/zookeeper-ensemble.sh kill N     kill -9 server N
#   scripts/zookeeper-ensemble.sh restart N  start server N again, until it serves
#   scripts/zookeeper-ensemble.sh freeze N | thaw N   SIGSTOP / SIGCONT server N
#   scripts/zookeeper-ensemble.sh stop       every server killed, the directory deleted
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT_DIR=${CLOCKFLAKE_ZK_ENSEMBLE_DIR:-/tmp/clockflake-zk-ensemble}
JAR=/usr/share/java/zookeeper.jar

install() {
  if [ -f "$JAR" ] && command -v java >/dev/null; then return; fi
  apt_install "Debian's zookeeper package" --no-install-recommends zookeeper
}

port() { cat "$ROOT_DIR/$1/port"; }

mode() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$(port "$1") && printf srvr >&3 && cat <&3" 2>/dev/null \
    | sed -n 's/^Mode: //p' || true
}

server_start() {
  local n=$1 dir=$ROOT_DIR/$1
  setsid java -Xmx192m -Dzookeeper.log.file="$dir/server.log" \
    -Dlog4j.configuration="file:$ROOT_DIR/log4j.properties" \
    -cp "$JAR:/usr/share/java/*" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
    >>"$dir/stdout.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
}

# Until server N (or, without N, a quorum) serves: leader or follower.
await() {
  for _ in $(seq 1 600); do
    for n in ${1:-1 2 3}; do
      case "$(mode "$n")" in leader | follower) return ;; esac
    done
    sleep 0.1
  done
  echo "zookeeper-ensemble.sh: no quorum after 60 s" >&2
  tail -n 20 "$ROOT_DIR"/*/server.log >&2 || true
  exit 1
}

kill_server() {
  kill_pid_file "$ROOT_DIR/$1/pid"
}

url() {
  echo "zookeeper://127.0.0.1:$(port 1),127.0.0.1:$(port 2),127.0.0.1:$(port 3)"
}

case "${1:-}" in
  start)
    install
    for n in 1 2 3; do kill_server "$n"; done
    rm -rf "$ROOT_DIR"
    mkdir -p "$ROOT_DIR"
    cat >"$ROOT_DIR/log4j.properties" <<'LOG'
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=${zookeeper.log.file}
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
LOG
    servers=""
    for n in 1 2 3; do
      mkdir -p "$ROOT_DIR/$n/data"
      echo "$n" >"$ROOT_DIR/$n/data/myid"
      free_port >"$ROOT_DIR/$n/port"
      servers+="server.$n=127.0.0.1:$(free_port):$(free_port)"$'\n'
    done
    for n in 1 2 3; do
      cat >"$ROOT_DIR/$n/zoo.cfg" <<CFG
tickTime=200
initLimit=20
syncLimit=5
minSessionTimeout=400
maxSessionTimeout=60000
dataDir=$ROOT_DIR/$n/data
clientPort=$(port "$n")
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
forceSync=no
$servers
CFG
      server_start "$n"
    done
    await
    echo "zookeeper-ensemble.sh: three servers in $ROOT_DIR" >&2
    url
    ;;
  url) url ;;
  leader | follower)
    for _ in $(seq 1 300); do
      for n in 1 2 3; do
        if [ "$(mode "$n")" = "$1" ]; then echo "$n"; exit 0; fi
      done
      sleep 0.1
    done
    echo "zookeeper-ensemble.sh: no $1" >&2
    exit 1
    ;;
  kill) kill_server "$2" ;;
  restart)
    server_start "$2"
    await "$2"
    ;;
  freeze) kill -STOP "$(cat "$ROOT_DIR/$2/pid")" ;;
  thaw) kill -CONT "$(cat "$ROOT_DIR/$2/pid")" ;;
  stop)
    for n in 1 2 3; do kill_server "$n"; done
    rm -rf "$ROOT_DIR"
    ;;
  *)
    echo "usage: $0 start|url|leader|follower|kill N|restart N|freeze N|thaw N|stop" >&2
    exit 2
    ;;
esac
