"""Each Python recipe of docs/recipes/, run against its real framework."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
from clockflake import Generator, decode
from fastapi.testclient import TestClient

HERE = Path(__file__).resolve().parents[1]
TOO_BIG_FOR_A_JS_NUMBER = 2**53


def pg_url() -> str:
    url = os.environ.get("CLOCKFLAKE_PG_URL")
    if not url:
        pytest.skip("no CLOCKFLAKE_PG_URL (make test-recipes starts a PostgreSQL)")
    return url


def test_fastapi_sqlalchemy_postgres(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = pg_url()
    sqlalchemy_url = "postgresql+psycopg://" + url.split("://", 1)[1]
    monkeypatch.setenv("DATABASE_URL", sqlalchemy_url)
    monkeypatch.setenv("CLOCKFLAKE_URI", f"file://{tmp_path}/ids?app=orders")
    fastapi_app = importlib.import_module("fastapi_app")
    started = int(time.time() * 1000)
    with TestClient(fastapi_app.app) as client:
        with fastapi_app.engine.begin() as connection:
            connection.exec_driver_sql("DELETE FROM orders")
        made: list[dict[str, object]] = []

        def post_many() -> None:
            for n in range(250):
                response = client.post("/orders", json={"item": f"item {n}"})
                while response.status_code == 503:  # a late lease renewal: retry, as a client does
                    assert int(response.headers["Retry-After"]) >= 1
                    time.sleep(0.05)
                    response = client.post("/orders", json={"item": f"item {n}"})
                assert response.status_code == 200, response.text
                made.append(response.json())

        threads = [threading.Thread(target=post_many) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ids = [order["id"] for order in made]
        assert all(isinstance(i, str) for i in ids)  # strings in JSON, never numbers
        assert len(set(ids)) == 1000
        assert all(int(i) >= TOO_BIG_FOR_A_JS_NUMBER for i in ids)  # why strings matter
        one = made[0]
        fetched = client.get(f"/orders/{one['id']}")
        assert fetched.status_code == 200 and fetched.json() == one
        assert client.get("/orders/-1").status_code == 422  # not an id
        assert client.get("/orders/12").status_code == 404
        window = client.get("/orders", params={"from_ms": started, "to_ms": started + 3_600_000})
        assert sorted(int(o["id"]) for o in window.json()) == sorted(int(i) for i in ids)
        assert decode(ids[0]).worker_id == 0
        check_readiness(client, tmp_path / "ids" / "orders")


def check_readiness(client: TestClient, pool: Path) -> None:
    """/readyz: 200 with a live lease; 503 with the reason once its lock file is removed (the
    lease is lost at its next renewal) while every other worker id is held, so that leasing
    again fails; 200 again, without a restart, once a worker id is free."""
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["state"] == "active", ready.text
    assert ready.json()["worker_id"] == 0
    uri = f"file://{pool.parent}?app={pool.name}"
    others = [Generator.open(uri, heal=False) for _ in range(127)]  # clockseq: 128 worker ids
    try:
        (pool / "worker-0.lock").unlink()
        others.append(Generator.open(uri, heal=False))  # a newcomer takes worker id 0
        deadline = time.monotonic() + 10
        while (unready := client.get("/readyz")).status_code == 200:
            assert time.monotonic() < deadline, "still ready 10 s after the lease was lost"
            time.sleep(0.01)
        assert unready.status_code == 503, unready.text
        body = unready.json()
        assert body["state"] == "healing" and body["worker_id"] is None
        assert "removed or replaced" in body["last_loss"], body
        freed = others.pop(5)
        freed.close()  # its worker id is free again: the next attempt takes it
        deadline = time.monotonic() + 10
        while (healed := client.get("/readyz")).status_code == 503:
            assert time.monotonic() < deadline, "not ready 10 s after a worker id was freed"
            time.sleep(0.05)
        assert healed.status_code == 200 and healed.json()["worker_id"] == freed.worker_id, (
            healed.text
        )
        assert client.post("/orders", json={"item": "after"}).status_code == 200
    finally:
        for other in others:
            other.close()


def test_pydantic_models() -> None:
    pydantic_models = importlib.import_module("pydantic_models")
    body, info = pydantic_models.example()
    order = json.loads(body)
    assert isinstance(order["id"], str) and isinstance(order["customer_id"], str)
    assert order["parent_id"] is None
    parts = json.loads(info)["parts"]
    assert parts == decode(int(order["id"])).as_dict()


def manage(tmp_path: Path, *args: str) -> str:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="shop.settings",
        ORDERS_DB=str(tmp_path / "orders.sqlite3"),
        CLOCKFLAKE_URI=f"file://{tmp_path}/ids?app=orders",
        PYTHONPATH=str(HERE / "django_orders"),
    )
    result = subprocess.run(
        [sys.executable, str(HERE / "django_orders" / "manage.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_django_model_default(tmp_path: Path) -> None:
    # The committed migration is what makemigrations writes today (it can serialize next_id).
    manage(tmp_path, "makemigrations", "orders", "--check", "--dry-run")
    migration = (HERE / "django_orders/orders/migrations/0001_initial.py").read_text()
    assert "default=clockflake.django.next_id" in migration
    manage(tmp_path, "migrate", "-v", "0")
    script = (
        "import json\n"
        "from orders.models import Order\n"
        "made = [Order.objects.create(item=f'item {n}') for n in range(200)]\n"
        "print(json.dumps([o.pk for o in Order.objects.all()]))\n"
    )
    out = manage(tmp_path, "shell", "-c", script)
    ids = json.loads(out.strip().splitlines()[-1])
    assert len(set(ids)) == 200 and ids == sorted(ids)
    assert all(decode(i).worker_id == 0 for i in ids)


class Gunicorn:
    """The Django recipe served as in production (gunicorn -c gunicorn.conf.py shop.wsgi), one
    worker, on a free port; `url` once it listens."""

    def __init__(self, tmp_path: Path, uri: str) -> None:
        env = dict(
            os.environ,
            ORDERS_DB=str(tmp_path / "orders.sqlite3"),
            CLOCKFLAKE_URI=uri,
            BIND="127.0.0.1:0",
            WEB_CONCURRENCY="1",
            PYTHONPATH=str(HERE / "django_orders"),
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "shop.wsgi"],
            cwd=HERE / "django_orders",
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        listening = threading.Event()
        self.url = ""

        def read_log() -> None:
            assert self.process.stderr is not None
            for line in self.process.stderr:
                self.log.append(line)
                if "Listening at: " in line and not self.url:
                    self.url = line.split("Listening at: ", 1)[1].split()[0]
                    listening.set()

        threading.Thread(target=read_log, daemon=True).start()
        if not listening.wait(30):
            self.process.kill()
            raise AssertionError("gunicorn did not listen within 30 s:\n" + "".join(self.log))

    def get(self, path: str) -> tuple[int, dict[str, object]]:
        return self.request(path, None)

    def request(self, path: str, form: dict[str, str] | None) -> tuple[int, dict[str, object]]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            with urllib.request.urlopen(self.url + path, data=data, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def stop(self) -> int:
        """SIGTERM, as Kubernetes sends it; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


def test_django_readiness_heals(tmp_path: Path) -> None:
    """/readyz under Gunicorn: 200 with the lease; 503 with the reason once its lock file is
    removed while every other worker id is held; 200 again, without a restart, once one is free."""
    manage(tmp_path, "migrate", "-v", "0")
    pool = tmp_path / "ids" / "orders"
    uri = f"file://{pool.parent}?app={pool.name}"
    app = Gunicorn(tmp_path, uri)
    others: list[Generator] = []
    try:
        status, body = app.get("/readyz")  # the first probe leases the worker id
        assert status == 200 and body["state"] == "active" and body["worker_id"] == 0, body
        status, order = app.request("/orders", {"item": "book"})
        assert status == 201 and decode(int(str(order["id"]))).worker_id == 0, order
        others = [Generator.open(uri, heal=False) for _ in range(127)]  # clockseq: 128
        (pool / "worker-0.lock").unlink()
        others.append(Generator.open(uri, heal=False))  # a newcomer takes worker id 0
        deadline = time.monotonic() + 10
        while (probe := app.get("/readyz"))[0] == 200:
            assert time.monotonic() < deadline, "still ready 10 s after the lease was lost"
            time.sleep(0.01)
        status, body = probe
        # (worker_id: None once the lost lease is dropped; stats() may still show the lost one
        # for a moment, between the renewal's loss and the healer taking it out.)
        assert status == 503 and body["state"] == "healing", body
        assert "removed or replaced" in str(body["last_loss"]), body
        status, refused = app.request("/orders", {"item": "while healing"})
        assert status == 503, refused  # never an id under the lost lease
        freed = others.pop(5)
        freed.close()  # its worker id is free again: the next attempt takes it
        deadline = time.monotonic() + 10
        while (probe := app.get("/readyz"))[0] == 503:
            assert time.monotonic() < deadline, "not ready 10 s after a worker id was freed"
            time.sleep(0.05)
        status, body = probe
        assert status == 200 and body["worker_id"] == freed.worker_id, body
        status, order = app.request("/orders", {"item": "after"})
        assert status == 201 and decode(int(str(order["id"]))).worker_id == freed.worker_id
    finally:
        for other in others:
            other.close()
        assert app.stop() == 0, "".join(app.log)


def test_django_sigterm_releases_the_worker_id(tmp_path: Path) -> None:
    """On SIGTERM Gunicorn's worker_exit closes the generator: a newcomer gets the worker id at
    once, not after the lease's 10 s TTL (on PostgreSQL, where nothing else would free it)."""
    url = pg_url()
    uri = f"{url}{'&' if '?' in url else '?'}app=django-{uuid.uuid4().hex[:12]}&ttl=10s"
    manage(tmp_path, "migrate", "-v", "0")
    app = Gunicorn(tmp_path, uri)
    try:
        status, body = app.get("/readyz")
        assert status == 200 and body["state"] == "active", body
        held = body["worker_id"]
        status, order = app.request("/orders", {"item": "book"})
        assert status == 201, order
    finally:
        exit_code = app.stop()
    stopped = time.monotonic()
    assert exit_code == 0, "".join(app.log)
    assert any("worker id released" in line for line in app.log), "".join(app.log)
    with Generator.open(uri, heal=False) as newcomer:
        assert newcomer.worker_id == held, "the worker id was not released on SIGTERM"
        assert time.monotonic() - stopped < 1.0
        assert newcomer.next_id() > int(str(order["id"]))  # continues above the marks
