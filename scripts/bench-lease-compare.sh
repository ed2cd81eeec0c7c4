#!/usr/bin/env bash
# The lease bench (lease/benches/lease.rs) of another checkout beside this one's, in turns
# (before, after, before, after) against one set of throwaway servers on loopback:
#   scripts/bench-lease-compare.sh /path/to/before/checkout [rounds]
# The before checkout is e.g. `git worktree add --detach ../before <commit>`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=$(cd "${1:?usage: scripts/bench-lease-compare.sh BEFORE_CHECKOUT [ROUNDS]}" && pwd)
ROUNDS=${2:-2}
for checkout in "$BEFORE" "$ROOT"; do
  (cd "$checkout" && cargo build -q --profile bench -p clockflake-lease --bench lease)
done
export CLOCKFLAKE_PG_DIR CLOCKFLAKE_ZK_DIR CLOCKFLAKE_REDIS_DIR CLOCKFLAKE_ETCD_DIR
CLOCKFLAKE_PG_DIR=$(mktemp -d /tmp/clockflake-lease-pg.XXXXXX)
CLOCKFLAKE_ZK_DIR=${TMPDIR:-/tmp}/clockflake-zk-$$
CLOCKFLAKE_REDIS_DIR=${TMPDIR:-/tmp}/clockflake-redis-$$
CLOCKFLAKE_ETCD_DIR=$(mktemp -d /tmp/clockflake-etcd.XXXXXX)
trap '"$ROOT"/scripts/postgres.sh stop; "$ROOT"/scripts/zookeeper.sh stop; "$ROOT"/scripts/redis.sh stop
  "$ROOT"/scripts/etcd-cluster.sh stop' EXIT
"$ROOT"/scripts/postgres.sh start
CLOCKFLAKE_PG_URL=$("$ROOT"/scripts/postgres.sh url)
CLOCKFLAKE_ZK_URL=$("$ROOT"/scripts/zookeeper.sh start)
CLOCKFLAKE_REDIS_URL=$("$ROOT"/scripts/redis.sh start)
# A three-member etcd (a checkout from before etcd:// reports it as skipped).
CLOCKFLAKE_ETCD_URL=$("$ROOT"/scripts/etcd-cluster.sh start)
export CLOCKFLAKE_PG_URL CLOCKFLAKE_ZK_URL CLOCKFLAKE_REDIS_URL CLOCKFLAKE_ETCD_URL
for round in $(seq "$ROUNDS"); do
  for checkout in "$BEFORE" "$ROOT"; do
    echo "=== round $round: $checkout ($(git -C "$checkout" rev-parse --short HEAD))"
    (cd "$checkout" && cargo bench -q -p clockflake-lease --bench lease)
  done
done
