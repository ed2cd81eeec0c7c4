"""Gunicorn's settings for the recipe: gunicorn -c gunicorn.conf.py shop.wsgi

Django has no shutdown hook of its own; the server that runs it has. On SIGTERM Gunicorn's
master asks each worker to stop; a worker finishes its request in flight, then runs worker_exit,
which closes the generator: its high-water marks are stored and its worker id is released for the
next process at once, not when the lease's TTL runs out.
"""

import os

import clockflake.django

bind = os.environ.get("BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))  # each worker leases its own worker id
graceful_timeout = 22  # after SIGTERM: 10 s for requests in flight + close() (2 s + the TTL)


def worker_exit(server, worker):
    # close(): store the marks, release the worker id. Explicit: the interpreter's teardown
    # would usually drop the generator too, but nothing guarantees when, or that it does.
    clockflake.django.reset()
    server.log.info("clockflake: generator closed, worker id released (pid %s)", worker.pid)
