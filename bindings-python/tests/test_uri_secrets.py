"""Secrets in coordinator URIs never reach Python: every URI of tests/uris/secrets.json is refused
with its code, and no form of its secrets (as written, percent-decoded, percent-encoded) shows in
str(exc), repr(exc), exc.args or the traceback. With CLOCKFLAKE_PG_URL (a trust-auth server), a
generator opened with a password shows none of it in gen.coordinator or repr(gen) either."""

from __future__ import annotations

import json
import os
import traceback
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from clockflake import ClockflakeError, Generator

TABLE = Path(__file__).resolve().parents[2] / "tests" / "uris" / "secrets.json"
CASES: list[dict[str, Any]] = json.loads(TABLE.read_text())["cases"]


def forms(secret: str) -> set[str]:
    """The secret as written, percent-decoded, and percent-encoded (upper and lower case hex)."""
    encoded = urllib.parse.quote(secret, safe="")
    return {secret, urllib.parse.unquote(secret), encoded, encoded.lower()}


def assert_clean(what: str, text: str, secrets: list[str]) -> None:
    shown = sorted(form for secret in secrets for form in forms(secret) if form in text)
    assert not shown, f"{what} shows {shown}: {text}"


def test_the_table_has_enough_cases() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_no_secret_in_the_error(case: dict[str, Any]) -> None:
    with pytest.raises(ClockflakeError) as caught:
        Generator.open(case["uri"])
    error = caught.value
    assert error.code == case["code"], str(error)
    texts = {
        "str": str(error),
        "repr": repr(error),
        "args": repr(error.args),
        "traceback": "".join(traceback.format_exception(error)),
    }
    for what, text in texts.items():
        assert_clean(what, text, case["secrets"])


PG_URL = os.environ.get("CLOCKFLAKE_PG_URL")


@pytest.mark.skipif(
    not PG_URL, reason="CLOCKFLAKE_PG_URL not set (make test-python-pg starts a server)"
)
def test_no_secret_in_an_open_generator() -> None:
    assert PG_URL is not None
    base = PG_URL.split("?")[0]
    scheme, rest = base.split("://", 1)
    user, host = rest.split("@", 1)
    app = f"secrets-py-{os.getpid()}"
    secrets = ["Tr0ub@d/or?#x", "Qu3ryS3cret"]
    with_password = f"{scheme}://{user}:{urllib.parse.quote(secrets[0], safe='')}@{host}"
    for uri in [
        f"{with_password}?app={app}&ttl=2s",
        f"{base}?app={app}&ttl=2s&password={secrets[1]}",
    ]:
        with Generator.open(uri) as gen:
            assert gen.coordinator is not None and app in gen.coordinator
            assert_clean("gen.coordinator", gen.coordinator, secrets)
            assert_clean("repr(gen)", repr(gen), secrets)
            gen.next_id()
