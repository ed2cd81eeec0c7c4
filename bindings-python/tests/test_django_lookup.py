"""clockflake.django's lookup order, as docs/recipes/django.md states it: `configure()` first, then
Django's settings (`CLOCKFLAKE_URI`, `CLOCKFLAKE_LAYOUT`), then the environment variables of the
same names; the first source with a URI gives the layout too.

Django need not be installed: the two modules the helper reads (`django.conf`,
`django.core.exceptions`) are stood in for. Where Django is installed, one more test runs the same
order against the real settings, in a process of its own (Django's settings are configured once
per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from clockflake import InvalidUriError
from clockflake import django as cf_django


class _ImproperlyConfigured(Exception):
    """What Django raises when settings are read before any settings module is configured."""


class _Settings:
    """`django.conf.settings`: `values` None as in a process with no settings configured."""

    def __init__(self, values: dict[str, str] | None) -> None:
        self._values = values

    def __getattr__(self, name: str) -> str:
        if self._values is None:
            raise _ImproperlyConfigured(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None


def _django(monkeypatch: pytest.MonkeyPatch, settings: dict[str, str] | None) -> None:
    """Stands in for Django with `settings` (see `_Settings`)."""
    conf = types.ModuleType("django.conf")
    conf.settings = _Settings(settings)  # type: ignore[attr-defined]
    exceptions = types.ModuleType("django.core.exceptions")
    exceptions.ImproperlyConfigured = _ImproperlyConfigured  # type: ignore[attr-defined]
    modules = {
        "django": types.ModuleType("django"),
        "django.conf": conf,
        "django.core": types.ModuleType("django.core"),
        "django.core.exceptions": exceptions,
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def _no_django(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if Django were not installed: importing it fails."""
    monkeypatch.setitem(sys.modules, "django.conf", None)


@pytest.fixture(autouse=True)
def _nothing_configured(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no generator, no `configure()` and no variables, and ends closed."""
    cf_django.reset()
    monkeypatch.setattr(cf_django, "_configured", None)
    monkeypatch.delenv("CLOCKFLAKE_URI", raising=False)
    monkeypatch.delenv("CLOCKFLAKE_LAYOUT", raising=False)
    yield
    cf_django.reset()


def _pool(tmp_path: Path, app: str) -> str:
    return f"{tmp_path.as_uri()}?app={app}"


def _opened() -> tuple[str, str]:
    """The app and the layout of the generator the helper opens."""
    gen = cf_django.generator()
    coordinator = gen.coordinator or ""
    return coordinator.rpartition("?app=")[2], gen.layout["name"]


def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLOCKFLAKE_URI", _pool(tmp_path, "environment"))
    monkeypatch.setenv("CLOCKFLAKE_LAYOUT", "discord")


def _settings(tmp_path: Path) -> dict[str, str]:
    return {"CLOCKFLAKE_URI": _pool(tmp_path, "settings"), "CLOCKFLAKE_LAYOUT": "sonyflake"}


def test_configure_comes_before_the_settings_and_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _django(monkeypatch, _settings(tmp_path))
    _environment(monkeypatch, tmp_path)
    cf_django.configure(_pool(tmp_path, "configured"), layout="twitter")
    assert _opened() == ("configured", "twitter")


def test_the_settings_come_before_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _django(monkeypatch, _settings(tmp_path))
    _environment(monkeypatch, tmp_path)
    assert _opened() == ("settings", "sonyflake")


def test_the_layout_comes_from_the_source_of_the_uri(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The settings name a URI and no layout: the default layout, not the environment's.
    _django(monkeypatch, {"CLOCKFLAKE_URI": _pool(tmp_path, "settings")})
    _environment(monkeypatch, tmp_path)
    assert _opened() == ("settings", "clockseq")


@pytest.mark.parametrize(
    "django",
    ["not installed", "settings not configured", "settings without CLOCKFLAKE_URI"],
)
def test_the_environment_when_the_settings_name_no_uri(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, django: str
) -> None:
    if django == "not installed":
        _no_django(monkeypatch)
    else:
        _django(monkeypatch, None if django == "settings not configured" else {})
    _environment(monkeypatch, tmp_path)
    assert _opened() == ("environment", "discord")


def test_no_uri_anywhere_is_invalid_uri_naming_every_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _django(monkeypatch, {})
    with pytest.raises(InvalidUriError) as raised:
        cf_django.next_id()
    assert raised.value.code == "INVALID_URI"
    message = str(raised.value)
    assert "settings" in message and "environment" in message and "configure(" in message


def test_configure_after_the_first_id_waits_for_reset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _no_django(monkeypatch)
    _environment(monkeypatch, tmp_path)
    cf_django.next_id()
    cf_django.configure(_pool(tmp_path, "configured"), layout="twitter")
    assert _opened() == ("environment", "discord")  # the generator is opened once
    cf_django.reset()
    assert _opened() == ("configured", "twitter")


_REAL_DJANGO = """
import sys
from django.conf import settings
from clockflake import django as cf_django

if sys.argv[1] == "configured":
    settings.configure(CLOCKFLAKE_URI=sys.argv[2], CLOCKFLAKE_LAYOUT="sonyflake")
gen = cf_django.generator()
print(gen.coordinator.rpartition("?app=")[2], gen.layout["name"])
cf_django.reset()
"""


@pytest.mark.parametrize(
    ("settings", "expected"),
    [("configured", "settings sonyflake"), ("not configured", "environment discord")],
)
def test_the_same_order_with_django_itself(tmp_path: Path, settings: str, expected: str) -> None:
    pytest.importorskip("django")
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env["CLOCKFLAKE_URI"] = _pool(tmp_path, "environment")
    env["CLOCKFLAKE_LAYOUT"] = "discord"
    run = subprocess.run(
        [sys.executable, "-c", _REAL_DJANGO, settings, _pool(tmp_path, "settings")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == expected
