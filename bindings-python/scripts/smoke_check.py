"""What a user does first with an installed clockflake; run from outside the source tree.

Usage: python smoke_check.py EXPECTED_VERSION [--scripts DIR]

The console script the wheel declares is run from beside this interpreter, where pip puts it in
a virtualenv; with --scripts, from DIR through --interpreter (`pip install --target` puts it in
TARGET/bin with the installing interpreter's shebang; under qemu-user, this interpreter's own
path cannot be executed, so the command that runs it is passed whole).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import clockflake
from clockflake import Generator, decode


def console_script(scripts: Path | None, interpreter: list[str]) -> list[str]:
    """The command that runs the wheel's `clockflake` console script (project.scripts)."""
    if scripts is None:
        return [str(Path(sys.executable).parent / "clockflake")]
    return [*(interpreter or [sys.executable]), str(scripts / "clockflake")]


def main(expected_version: str, scripts: Path | None, interpreter: list[str]) -> None:
    assert "site-packages" in clockflake.__file__, clockflake.__file__
    assert clockflake.__version__ == expected_version, clockflake.__version__
    gen = Generator(worker_id=1)
    id = gen.next_id()
    parts = decode(id)
    assert parts.worker_id == 1, parts
    assert decode(str(id)) == parts, parts
    try:
        decode(-1)
    except clockflake.InvalidIdError as error:
        assert error.code == "INVALID_ID", error.code
        assert isinstance(error, ValueError)
    else:
        raise AssertionError("decode(-1) raised nothing")
    # file:///tmp/... here, file:///C:/Users/... on Windows.
    with tempfile.TemporaryDirectory() as directory:
        uri = f"{Path(directory).as_uri()}?app=smoke"
        with Generator.open(uri) as leased, Generator.open(uri) as beside:
            assert decode(leased.next_id()).worker_id == leased.worker_id == 0
            assert beside.worker_id == 1, beside.worker_id
            ids = leased.next_ids(10_000)
            assert len(set(ids)) == len(ids) == 10_000
    codec = clockflake.PublicIds(1, bytes(16))
    assert codec.decode_text(codec.encode_text(id)) == id
    command = [*console_script(scripts, interpreter), "suggest", "300", "10000", "30"]
    out = subprocess.run(command, capture_output=True, text=True)
    assert out.returncode == 0 and "512 workers" in out.stdout, out
    assert clockflake.suggest_layout(300, 10_000, 30)["max_worker_id"] == 511
    version = ".".join(map(str, sys.version_info[:3]))
    print(f"smoke: Python {version}, clockflake {clockflake.__version__}: {id} -> {parts}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("expected_version")
    parser.add_argument("--scripts", type=Path, help="where the console scripts were installed")
    parser.add_argument(
        "--interpreter", type=shlex.split, default=[], help="the command that runs this Python"
    )
    arguments = parser.parse_args()
    main(arguments.expected_version, arguments.scripts, arguments.interpreter)
