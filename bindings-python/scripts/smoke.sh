#!/usr/bin/env bash
# Installs the package as a user would, into fresh virtualenvs outside the source tree:
#   1. `pip install ./bindings-python` (pip runs maturin through the PEP 517 build backend);
#   2. a wheel from `maturin build --release`, installed with pip.
# Each time: import clockflake, make an id, decode it, lease a worker id, encode a public id. CARGO_TARGET_DIR (set by make) lets the
# builds reuse the compiled crates instead of starting from scratch.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

check() {
  (cd "$WORK" && "$1/bin/python" - <<'PY'
import clockflake
from clockflake import Generator, decode
assert "site-packages" in clockflake.__file__, clockflake.__file__
gen = Generator(worker_id=1)
id = gen.next_id()
parts = decode(id)
assert parts.worker_id == 1 and decode(str(id)) == parts, parts
try:
    decode(-1)
except clockflake.InvalidIdError as error:
    assert error.code == "INVALID_ID" and isinstance(error, ValueError)
import tempfile
with tempfile.TemporaryDirectory() as d:
    with Generator.open(f"file://{d}?app=smoke") as leased:
        assert decode(leased.next_id()).worker_id == leased.worker_id == 0
codec = clockflake.PublicIds(1, bytes(16))
assert codec.decode_text(codec.encode_text(id)) == id
print(f"smoke: {clockflake.__file__}: {id} -> {parts}")
PY
  )
}

echo "smoke: pip install ./bindings-python into a fresh virtualenv"
"$PYTHON" -m venv "$WORK/from-source"
"$WORK/from-source/bin/python" -m pip install -q --disable-pip-version-check "$ROOT/bindings-python"
check "$WORK/from-source"

echo "smoke: maturin build --release, then pip install the wheel into another fresh virtualenv"
"$WORK/from-source/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9.4,<2"
"$WORK/from-source/bin/maturin" build -q --release -m "$ROOT/bindings-python/Cargo.toml" -o "$WORK/wheels"
ls "$WORK"/wheels/*-abi3-*.whl >/dev/null
"$PYTHON" -m venv "$WORK/from-wheel"
"$WORK/from-wheel/bin/python" -m pip install -q --disable-pip-version-check "$WORK"/wheels/*.whl
check "$WORK/from-wheel"
