"""Runs every code block of the documentation (docs/**/*.md and README.md), so none goes stale.

    python docs/tools/snippets.py [--list] [FILE.md ...]
    python docs/tools/snippets.py --self-test

A block runs exactly as the page shows it, in a fresh temporary directory of its own (its working
directory), so a block that needs a directory makes it there (`./ids`) or in a temporary
directory, as a reader who pastes it would. Nothing in a block is rewritten. `--self-test` proves
the harness runs the text as-is: a block that leases from an absolute directory whose parent does
not exist (`file:///var/lib/myapp/ids`, what the README once showed) must fail, and the same block
with `./ids` must pass.

A fenced block runs by its language:
  python   a script of its own, in the repository's .venv (clockflake built into it)
  js       an ES module of its own (.mjs), in a folder whose node_modules/clockflake is
           bindings-node (its lib/ built)
  sh       bash -euo pipefail, in a folder of its own, with .venv/bin first on PATH
  rust     compiled and run as a doctest by the crate docs/rust (`cargo test -p clockflake-docs
           --doc`), which includes every page with a rust block: this script checks that it
           includes each one, then runs it
Blocks in text, sql, toml, json, yaml, ini, http and console are examples to read, not code. Any
other language is an error, so no block is left out by accident.

An HTML comment on the line before a block changes how it runs:
  <!-- snippet: skip REASON -->   not run; the reason is required and printed (keep these few)
  <!-- snippet: server -->        sh: run with a clockflake-server on a file:// lease listening
                                  on 127.0.0.1:8080, as the pages start it; each such block runs
                                  with a server of its own in a network namespace of its own
                                  (`unshare --user --map-root-user --net`), so port 8080 is free
                                  whatever else the machine runs; without user namespaces, on the
                                  machine's own 127.0.0.1:8080 if it is free
  <!-- snippet: postgres -->      needs CLOCKFLAKE_PG_URL (a throwaway PostgreSQL: run under
                                  scripts/postgres.sh, as test-recipes does; no page needs it yet)
  <!-- snippet: fails CODE -->    must fail, printing the error code CODE
Lines that include a file (`--8<-- "path"`) are the tested recipes' own code: not run here.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
RUST_CRATE = ROOT / "docs" / "rust" / "src" / "lib.rs"
SERVER = ROOT / "target" / "debug" / "clockflake-server"
READ_ONLY = {"text", "sql", "toml", "json", "yaml", "ini", "http", "console"}
RUN = {"python", "js", "sh", "rust"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>[^`]*)$")
MARK = re.compile(r"^\s*<!--\s*snippet:\s*(?P<kind>\w+)\s*(?P<arg>.*?)\s*-->\s*$")


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    code: str
    mark: str | None
    arg: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = len(match["indent"]), match["fence"]
        lang = match["info"].strip().split(",")[0].split(" ")[0]
        mark = MARK.match(lines[i - 1]) if i > 0 else None
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][indent:])
            j += 1
        found.append(
            Block(
                path,
                i + 1,
                lang,
                "\n".join(body) + "\n",
                mark and mark["kind"],
                mark["arg"] if mark else "",
            )
        )
        i = j + 1
    return found


def pages(args: list[str]) -> list[Path]:
    if args:
        return [Path(a).resolve() for a in args]
    generated = ROOT / "docs" / "api"
    docs = [p for p in (ROOT / "docs").rglob("*.md") if generated not in p.parents]
    return sorted([ROOT / "README.md", *docs])


SERVER_DRIVER = """\
set -euo pipefail
if [ "${IN_NAMESPACE:-}" = 1 ]; then ip link set lo up; fi
CLOCKFLAKE_PUBLIC_KEY="$PUBLIC_KEY" "$SERVER" --lease "file://$SERVER_DIR/lease?app=docs" \\
  --listen 127.0.0.1:8080 >"$SERVER_DIR/log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 200); do
  if curl -fs -o /dev/null http://127.0.0.1:8080/readyz; then break; fi
  if ! kill -0 $server 2>/dev/null; then break; fi
  sleep 0.05
done
if ! curl -fs -o /dev/null http://127.0.0.1:8080/readyz; then
  echo "clockflake-server did not become ready on 127.0.0.1:8080:"; cat "$SERVER_DIR/log"; exit 1
fi
bash -euo pipefail "$SNIPPET"
"""


def server_command(scratch: Path, snippet: Path) -> tuple[list[str], dict[str, str]]:
    """How to run a `server` block: a driver that starts clockflake-server on 127.0.0.1:8080,
    waits until it is ready, runs the block and stops the server; in a user and network
    namespace of its own where the system allows one."""
    server_dir = Path(tempfile.mkdtemp(dir=scratch, prefix="server-"))
    driver = server_dir / "driver.sh"
    driver.write_text(SERVER_DRIVER)
    extra = {
        "SERVER": str(SERVER),
        "SERVER_DIR": str(server_dir),
        "SNIPPET": str(snippet),
        "PUBLIC_KEY": "1:" + "0123456789abcdef" * 2,  # public ids, for the pages that show them
    }
    if namespaces():
        return ["unshare", "--user", "--map-root-user", "--net", "bash", str(driver)], dict(
            extra, IN_NAMESPACE="1"
        )
    return ["bash", str(driver)], extra


_NAMESPACES: list[bool] = []


def namespaces() -> bool:
    """Whether this system lets an unprivileged process make a user and network namespace."""
    if not _NAMESPACES:
        try:
            probe = subprocess.run(
                ["unshare", "--user", "--map-root-user", "--net", "ip", "link", "set", "lo", "up"],
                capture_output=True,
            )
            _NAMESPACES.append(probe.returncode == 0)
        except FileNotFoundError:  # no unshare (util-linux) or no ip (iproute2)
            _NAMESPACES.append(False)
        if not _NAMESPACES[0]:
            print("no user namespaces here: server blocks run on this machine's 127.0.0.1:8080")
    return _NAMESPACES[0]


def node_folder(scratch: Path) -> Path:
    folder = scratch / "js"
    (folder / "node_modules").mkdir(parents=True)
    (folder / "node_modules" / "clockflake").symlink_to(ROOT / "bindings-node")
    return folder


def run_block(block: Block, scratch: Path, env: dict[str, str]) -> str | None:
    """Runs one block exactly as the page shows it, in a fresh directory; None on success, else
    what went wrong."""
    code = block.code
    folder = Path(tempfile.mkdtemp(dir=scratch, prefix="run-"))
    if block.lang == "python":
        file = folder / "snippet.py"
        command = [str(PYTHON), str(file)]
    elif block.lang == "js":
        folder = node_folder(folder)
        file = folder / "snippet.mjs"
        command = ["node", str(file)]
    else:
        file = folder / "snippet.sh"
        command = ["bash", "-euo", "pipefail", str(file)]
    file.write_text(code)
    if block.mark == "server":
        command, extra = server_command(scratch, file)
        env = dict(env, **extra)
    result = subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    output = result.stdout + result.stderr
    if block.mark == "fails":
        if result.returncode == 0 or block.arg not in output:
            return f"expected a failure with {block.arg}, got exit {result.returncode}:\n{output}"
        return None
    if result.returncode != 0:
        return f"exit {result.returncode}:\n{output}"
    return None


SELF_TEST_BAD = """\
```python
from clockflake import Generator

with Generator.open("file:///var/lib/myapp/ids?app=orders") as gen:
    print(gen.next_id())
```
"""
SELF_TEST_GOOD = SELF_TEST_BAD.replace(
    '"file:///var/lib/myapp/ids?app=orders"', 'Path("ids").resolve().as_uri() + "?app=orders"'
).replace("from clockflake", "from pathlib import Path\nfrom clockflake")


def self_test() -> int:
    """The harness runs what the page says: a lease in a directory whose parent is missing fails
    (the library never creates it), the same lease in ./ids passes."""
    if Path("/var/lib/myapp").exists():
        print("self-test: /var/lib/myapp exists on this machine, so it proves nothing here")
        return 1
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    outcomes = {}
    with tempfile.TemporaryDirectory(prefix="clockflake-snippets-self-test-") as scratch_name:
        scratch = Path(scratch_name)
        for name, text in (("bad", SELF_TEST_BAD), ("good", SELF_TEST_GOOD)):
            page = scratch / f"{name}.md"
            page.write_text(text)
            (block,) = blocks(page)
            outcomes[name] = run_block(block, scratch, env)
    problems = []
    if outcomes["bad"] is None:
        problems.append("a lease under the missing /var/lib/myapp passed: is the block rewritten?")
    if outcomes["good"] is not None:
        problems.append(f"the lease in ./ids failed: {outcomes['good']}")
    for problem in problems:
        print(f"self-test: {problem}")
    if not problems:
        print("self-test: blocks run as written (/var/lib/myapp/ids fails, ./ids passes)")
    return 1 if problems else 0


def check_rust_pages(found: list[Block]) -> list[str]:
    """Every page with a rust block is included by docs/rust (README: by it and by lease)."""
    included = RUST_CRATE.read_text()
    problems = []
    for path in sorted({b.path for b in found if b.lang == "rust"}):
        relative = os.path.relpath(path, RUST_CRATE.parent)
        if f'include_str!("{relative}")' not in included:
            problems.append(
                f"{path.relative_to(ROOT)} has rust blocks but docs/rust does not include it"
            )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--list", action="store_true", help="list the blocks and how each runs")
    parser.add_argument("--self-test", action="store_true", help="prove blocks run as written")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    found = [b for page in pages(args.files) for b in blocks(page)]
    problems = []
    for block in found:
        if block.lang not in RUN | READ_ONLY:
            problems.append(f"{block.where}: a block in {block.lang or '(no language)'}: label it")
        if block.mark == "skip" and not block.arg:
            problems.append(f"{block.where}: a skipped block needs a reason")
        if block.mark not in (None, "skip", "server", "postgres", "fails"):
            problems.append(f"{block.where}: unknown mark {block.mark}")
    problems += check_rust_pages(found)
    runnable = [
        b for b in found if b.lang in RUN - {"rust"} and b.mark != "skip" and "--8<--" not in b.code
    ]
    skipped = [b for b in found if b.mark == "skip"]
    if args.list:
        for b in found:
            how = "read" if b.lang in READ_ONLY else (b.mark or "run")
            print(f"{b.where}: {b.lang} ({how}{': ' + b.arg if b.arg else ''})")
        return 0
    if problems:
        print("\n".join(problems))
        return 1
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="clockflake-snippets-") as scratch_name:
        scratch = Path(scratch_name)
        env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}")
        env.pop("VIRTUAL_ENV", None)
        if any(b.mark == "server" for b in runnable):
            # Built here (a no-op when fresh), so the pages run against these sources' server.
            subprocess.run(
                ["cargo", "build", "-q", "-p", "clockflake-server"], cwd=ROOT, check=True
            )
        for block in runnable:
            if block.mark == "postgres" and "CLOCKFLAKE_PG_URL" not in env:
                failures.append(f"{block.where}: needs CLOCKFLAKE_PG_URL (see the postgres mark)")
                continue
            started = time.monotonic()
            problem = run_block(block, scratch, env)
            took = time.monotonic() - started
            status = "ok" if problem is None else "FAILED"
            print(f"{status:6} {block.where} ({block.lang}, {took:.1f} s)")
            if problem is not None:
                failures.append(f"{block.where}: {problem}")
    rust_pages = len({b.path for b in found if b.lang == "rust"})
    if rust_pages and not args.files:
        print(f"rust: {sum(b.lang == 'rust' for b in found)} blocks in {rust_pages} pages")
        rust = subprocess.run(["cargo", "test", "-q", "-p", "clockflake-docs", "--doc"], cwd=ROOT)
        if rust.returncode != 0:
            failures.append("rust blocks: cargo test -p clockflake-docs --doc failed")
    for b in skipped:
        print(f"skipped {b.where}: {b.arg}")
    print(f"{len(runnable)} blocks run, {len(skipped)} skipped, {len(failures)} failed")
    if failures:
        print("\n\n".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
