#!/usr/bin/env bash
# The fork check's cost per id (lease/examples/fork_fast_path.rs) of another checkout beside
# this one's, in turns (before, after; then after, before; ...), one process each:
#   scripts/bench-fork-compare.sh /path/to/before/checkout [rounds]
# The before checkout is e.g. `git worktree add --detach ../before <commit>`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=$(cd "${1:?usage: scripts/bench-fork-compare.sh BEFORE_CHECKOUT [ROUNDS]}" && pwd)
ROUNDS=${2:-6}
for checkout in "$BEFORE" "$ROOT"; do
  (cd "$checkout" && cargo build -q --profile bench -p clockflake-lease --example fork_fast_path)
done
run() {
  echo "=== round $1: $2 ($(git -C "$2" rev-parse --short HEAD))"
  "$2/target/release/examples/fork_fast_path" | grep -E '^\| (without|with|difference)'
}
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then run "$round" "$BEFORE"; run "$round" "$ROOT"
  else run "$round" "$ROOT"; run "$round" "$BEFORE"; fi
done
