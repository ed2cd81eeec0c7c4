#!/usr/bin/env bash
# make test-loadgen: the load generator against a clockflake-server on a temp file:// lease.
#   scripts/loadgen/smoke.sh SERVER_BINARY LOADGEN_BINARY
# 1. 1 s at 500 requests/s from 2 connections: every request sent on schedule, none failed.
# 2. 2 s at 500 requests/s from 1 connection, the server frozen (SIGSTOP) for 300 ms from 0.6 s
#    in: the p99 is at least 100 ms. Latency counts from each request's intended send time, so
#    the ~150 requests the freeze delays each count their wait; measured from the actual send
#    (coordinated omission) only the one in flight would, and the p99 stays a few ms.
set -euo pipefail
server=$1 loadgen=$2
dir=$(mktemp -d /tmp/clockflake-loadgen-smoke.XXXXXX)
RUST_LOG=warn "$server" --lease "file://$dir/leases?app=smoke" --listen 127.0.0.1:0 >"$dir/out" &
pid=$!
trap 'kill -CONT $pid 2>/dev/null || true; kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 300); do grep -q 'listening on' "$dir/out" && break; sleep 0.1; done
url="$(sed -n 's/.*listening on //p' "$dir/out")/v1/id"

field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

steady=$("$loadgen" --target "$url" --connections 2 --rate 500 --seconds 1 --warmup 0)
echo "steady: $steady"
[ "$(field "$steady" requests)" = 500 ] && [ "$(field "$steady" errors)" = 0 ] \
  || { echo "FAIL: not 500 requests without errors"; exit 1; }

# The freeze is what is measured, not a synchronisation: whenever it lands in the run, ~150
# requests are due while the server is stopped.
(sleep 0.6; kill -STOP $pid; sleep 0.3; kill -CONT $pid) &
frozen=$("$loadgen" --target "$url" --connections 1 --rate 500 --seconds 2 --warmup 0)
wait $!
echo "frozen 300 ms: $frozen"
python3 -c 'import json, sys; p99 = json.loads(sys.argv[1])["p99_us"]; sys.exit(p99 < 100_000)' \
  "$frozen" || { echo "FAIL: the freeze does not show in the p99"; exit 1; }
echo "loadgen smoke: ok"
