#!/usr/bin/env bash
# Checks a Windows wheel cross-built by scripts/dist-python.sh, short of running it (no Windows
# CPython can be had here; .github/workflows/python-release.yml runs it on Windows):
#   - its tag: cp310-abi3-win_amd64 (one wheel for CPython 3.10 and newer);
#   - its files: the extension as clockflake/_clockflake.pyd, and every Python file, stub and
#     marker of python/clockflake/;
#   - the DLLs the .pyd imports (scripts/check-pe-imports.sh): python3.dll (the stable ABI) and
#     Windows' own system DLLs only, no mingw-w64 or MSVC runtime (the wheel ships neither).
#   bindings-python/scripts/check-windows-wheel.sh WHEEL
set -euo pipefail
WHEEL=${1:?usage: check-windows-wheel.sh WHEEL}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NAME=$(basename "$WHEEL")
fail() { echo "check-windows-wheel: $NAME: $*" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
unzip -q "$WHEEL" -d "$WORK"

tags=$(sed -n 's/^Tag: //p' "$WORK"/clockflake-*.dist-info/WHEEL)
[ "$tags" = cp310-abi3-win_amd64 ] || fail "tags '$tags', expected cp310-abi3-win_amd64"

pyd=$WORK/clockflake/_clockflake.pyd
[ -f "$pyd" ] || fail "no clockflake/_clockflake.pyd"
for file in "$ROOT"/bindings-python/python/clockflake/*.py "$ROOT"/bindings-python/python/clockflake/*.pyi \
  "$ROOT"/bindings-python/python/clockflake/py.typed; do
  cmp -s "$file" "$WORK/clockflake/$(basename "$file")" || fail "clockflake/$(basename "$file") missing or different"
done

bash "$ROOT/scripts/check-pe-imports.sh" "$pyd" python3.dll
echo "check-windows-wheel: $NAME: tag cp310-abi3-win_amd64, $(find "$WORK/clockflake" -type f | wc -l) package files"
