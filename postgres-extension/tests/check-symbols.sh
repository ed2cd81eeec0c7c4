#!/usr/bin/env bash
# The hand-written SQL file against the library: every 'X_wrapper' the SQL names is exported
# by the library with its pg_finfo_X_wrapper record, and every #[pg_extern] function the
# library exports is declared in the SQL (none forgotten on either side).
#
#   tests/check-symbols.sh LIBRARY.so SQL_FILE
set -euo pipefail
lib=$1 sql=$2
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -E '^pg_finfo_.*_wrapper$' \
  | sed 's/^pg_finfo_//' | sort -u)
declared=$(grep -oE "'[a-z_0-9]+_wrapper'" "$sql" | tr -d "'" | sort -u)
if [ "$exported" != "$declared" ]; then
  echo "FAIL: the SQL file and the library disagree on the functions" >&2
  diff <(echo "$declared") <(echo "$exported") | sed 's/^</  only in the SQL:/; s/^>/  only in the library:/' >&2
  exit 1
fi
for symbol in $declared; do
  nm -D --defined-only "$lib" | grep -qE " T $symbol\$" || { echo "FAIL: $symbol not exported" >&2; exit 1; }
done
echo "ok: $(echo "$declared" | wc -l) functions, the SQL file and the library agree: $(echo $declared)"
