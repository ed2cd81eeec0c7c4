#!/usr/bin/env bash
# Checks a Windows DLL cross-built here (the Python extension's .pyd, the Node addon's .node): an
# x86_64 PE32+ image, stripped, that imports Windows' own system DLLs only, plus the ones named
# after it (each must be imported). A DLL of the mingw-w64 runtime (libgcc_s_seh-1.dll,
# libwinpthread-1.dll, libstdc++-6.dll), of an MSVC runtime (vcruntime140.dll, msvcp140.dll) or of
# Node (node.exe, libnode.dll: napi looks its functions up at load time) fails: no package ships
# one, so Windows would refuse to load the file. Prints the imports.
#   scripts/check-pe-imports.sh FILE [REQUIRED_DLL...]
set -euo pipefail
FILE=${1:?usage: check-pe-imports.sh FILE [REQUIRED_DLL...]}
shift
NAME=$(basename "$FILE")
fail() { echo "check-pe-imports: $NAME: $*" >&2; exit 1; }

objdump=$(command -v x86_64-w64-mingw32-objdump || command -v objdump)
headers=$("$objdump" -p "$FILE")
grep -q '^Magic.*20b' <<<"$headers" || fail "not a PE32+ (x86_64) image"
"$objdump" -f "$FILE" | grep -q HAS_SYMS && fail "keeps its symbol table (not stripped)"
dlls=$(sed -n 's/^\tDLL Name: //p' <<<"$headers" | tr '[:upper:]' '[:lower:]' | sort -u)
for required in "$@"; do
  grep -qx "$required" <<<"$dlls" || fail "does not import $required"
done
# Windows' own DLLs (System32 of every supported Windows): what Rust's std, ring, rustls's
# certificate store and the socket and lock code import.
SYSTEM_DLLS='^(kernel32|ntdll|msvcrt|advapi32|bcrypt|bcryptprimitives|crypt32|ws2_32|userenv|secur32|ncrypt|ole32|oleaut32|shell32|user32|iphlpapi|api-ms-win-[a-z0-9-]+)\.dll$'
others=$(grep -v -E "$SYSTEM_DLLS" <<<"$dlls" | grep -v -x -F -f <(printf '%s\n' "$@" .) || true)
[ -z "$others" ] || fail "imports DLLs that no package ships: $(tr '\n' ' ' <<<"$others")"
echo "check-pe-imports: $NAME: PE32+ x86_64, stripped, imports $(tr '\n' ' ' <<<"$dlls")"
