#!/usr/bin/env bash
# A throwaway three-member etcd cluster on 127.0.0.1 (Debian's etcd-server, 3.4), for the etcd://
# tests (lease/tests/etcd.rs, etcd_cluster.rs) and the lease benchmark.
#
#   scripts/etcd-cluster.sh start        install Debian's etcd-server and etcd-client if missing;
#                                        members 1, 2, 3 in $CLOCKFLAKE_ETCD_DIR/N on free ports
#                                        (data on /dev/shm when there is one), until a leader
#                                        serves; prints the URL naming all three
#   scripts/etcd-cluster.sh url          etcd://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#   scripts/etcd-cluster.sh endpoint N   etcd://127.0.0.1:PN (member N alone)
#   scripts/etcd-cluster.sh leader       the number of the member that leads now
#   scripts/etcd-cluster.sh follower     the number of a member that follows now
#   scripts/etcd-cluster.sh kill N       kill -9 member N
#   scripts/etcd-cluster.sh restart N    start member N again (its data kept), until it serves
#   scripts/etcd-cluster.sh freeze N | thaw N   SIGSTOP / SIGCONT member N
#   scripts/etcd-cluster.sh auth-on USER PASSWORD | auth-off USER PASSWORD
#                                        users root and USER (role root) with PASSWORD and
#                                        authentication on; off again (the users removed)
#   scripts/etcd-cluster.sh etcdctl ARGS...   etcdctl against the three members
#   scripts/etcd-cluster.sh stop         every member killed, the directories deleted
# The members use a 50 ms heartbeat and a 500 ms election timeout, so a leader lost is replaced
# within about a second, and etcd's shortest lease is 1 s.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT_DIR=${CLOCKFLAKE_ETCD_DIR:-/tmp/clockflake-etcd}

install() {
  if command -v etcd >/dev/null && command -v etcdctl >/dev/null; then return; fi
  apt_install "Debian's etcd-server and etcd-client" --no-install-recommends etcd-server etcd-client
}

port() { cat "$ROOT_DIR/$1/port"; }
endpoints() { echo "127.0.0.1:$(port 1),127.0.0.1:$(port 2),127.0.0.1:$(port 3)"; }

ctl() {
  ETCDCTL_API=3 etcdctl --dial-timeout=1s --command-timeout=2s "$@"
}

member_start() {
  local n=$1 dir=$ROOT_DIR/$1
  # The data directory lives where the link points: /dev/shm when there is one (fsync is free
  # there, as the tests need no durability across a reboot).
  setsid etcd --name "m$n" --data-dir "$dir/data" \
    --listen-client-urls "http://127.0.0.1:$(port "$n")" \
    --advertise-client-urls "http://127.0.0.1:$(port "$n")" \
    --listen-peer-urls "http://127.0.0.1:$(cat "$dir/peer")" \
    --initial-advertise-peer-urls "http://127.0.0.1:$(cat "$dir/peer")" \
    --initial-cluster "$(cat "$ROOT_DIR/cluster")" --initial-cluster-state new \
    --initial-cluster-token "$(basename "$ROOT_DIR")" \
    --heartbeat-interval 50 --election-timeout 500 --log-level warn --logger zap \
    >>"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
}

# Until member N (or, without N, the cluster) has a leader and serves a linearizable read.
await() {
  local targets
  if [ -n "${1:-}" ]; then targets="127.0.0.1:$(port "$1")"; else targets=$(endpoints); fi
  for _ in $(seq 1 300); do
    if ctl --endpoints="$targets" get /clockflake-ready >/dev/null 2>&1; then return; fi
    sleep 0.1
  done
  echo "etcd-cluster.sh: no leader after 30 s" >&2
  tail -n 20 "$ROOT_DIR"/*/server.log >&2 || true
  exit 1
}

# The number of the member whose status says it leads (or follows).
role() {
  local want=$1 n status
  for n in 1 2 3; do
    status=$(ctl --endpoints="127.0.0.1:$(port "$n")" endpoint status -w json 2>/dev/null) || continue
    if python3 -c '
import json, sys
status = json.loads(sys.argv[1])[0]["Status"]
leads = status["header"]["member_id"] == status["leader"]
sys.exit(0 if leads == (sys.argv[2] == "leader") and status["leader"] != 0 else 1)
' "$status" "$want"; then
      echo "$n"
      return
    fi
  done
  return 1
}

kill_member() {
  kill_pid_file "$ROOT_DIR/$1/pid"
}

case "${1:-}" in
  start)
    install
    for n in 1 2 3; do kill_member "$n" 2>/dev/null || true; done
    rm -rf "$ROOT_DIR"
    mkdir -p "$ROOT_DIR"
    cluster=""
    for n in 1 2 3; do
      mkdir -p "$ROOT_DIR/$n"
      if [ -d /dev/shm ] && [ -w /dev/shm ]; then
        ln -s "$(mktemp -d /dev/shm/clockflake-etcd.XXXXXX)" "$ROOT_DIR/$n/data"
      fi
      free_port >"$ROOT_DIR/$n/port"
      free_port >"$ROOT_DIR/$n/peer"
      cluster+="${cluster:+,}m$n=http://127.0.0.1:$(cat "$ROOT_DIR/$n/peer")"
    done
    echo "$cluster" >"$ROOT_DIR/cluster"
    for n in 1 2 3; do member_start "$n"; done
    await
    echo "etcd-cluster.sh: three members in $ROOT_DIR" >&2
    echo "etcd://$(endpoints)"
    ;;
  url) echo "etcd://$(endpoints)" ;;
  endpoint) echo "etcd://127.0.0.1:$(port "$2")" ;;
  leader | follower)
    for _ in $(seq 1 300); do
      if role "$1"; then exit 0; fi
      sleep 0.1
    done
    echo "etcd-cluster.sh: no $1" >&2
    exit 1
    ;;
  kill) kill_member "$2" ;;
  restart)
    member_start "$2"
    await "$2"
    ;;
  freeze) kill -STOP "$(cat "$ROOT_DIR/$2/pid")" ;;
  thaw) kill -CONT "$(cat "$ROOT_DIR/$2/pid")" ;;
  auth-on)
    # etcd turns authentication on only with a user `root` (of role root): USER's password.
    for user in root "$2"; do
      ctl --endpoints="$(endpoints)" user get "$user" >/dev/null 2>&1 ||
        ctl --endpoints="$(endpoints)" user add "$user:$3" >/dev/null
      ctl --endpoints="$(endpoints)" user grant-role "$user" root >/dev/null
    done
    ctl --endpoints="$(endpoints)" auth enable >/dev/null
    ;;
  auth-off)
    ctl --endpoints="$(endpoints)" --user "$2:$3" auth disable >/dev/null
    for user in "$2" root; do
      ctl --endpoints="$(endpoints)" user delete "$user" >/dev/null 2>&1 || true
    done
    ;;
  etcdctl)
    shift
    ctl --endpoints="$(endpoints)" "$@"
    ;;
  stop)
    if [ -d "$ROOT_DIR" ]; then
      for n in 1 2 3; do
        kill_member "$n"
        target=$(readlink "$ROOT_DIR/$n/data" 2>/dev/null || true)
        case "$target" in /dev/shm/clockflake-etcd.*) rm -rf "$target" ;; esac
      done
    fi
    rm -rf "$ROOT_DIR"
    ;;
  *)
    echo "usage: $0 start|url|endpoint N|leader|follower|kill N|restart N|freeze N|thaw N|" \
      "auth-on USER PASSWORD|auth-off USER PASSWORD|etcdctl ARGS...|stop" >&2
    exit 2
    ;;
esac
