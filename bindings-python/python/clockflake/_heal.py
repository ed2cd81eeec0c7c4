"""Log lines of a healing generator (``Generator.open(uri)``, ``heal=True``): called by the
native module from the thread where it happened (the lease's renewal thread, the healing
thread), with no lock held. On the ``clockflake`` logger: a lost lease and a failed attempt to
lease again are warnings, a new lease is info. ``logging`` is imported at the first event, not
with the package.
"""

from __future__ import annotations


def _log_event(
    kind: str, coordinator: str, worker_id: int | None, detail: str, retry_in_ms: int | None
) -> None:
    import logging

    logger = logging.getLogger("clockflake")
    fields = {
        "clockflake_event": kind,
        "coordinator": coordinator,
        "worker_id": worker_id,
        "retry_in_ms": retry_in_ms,
    }
    if kind == "lost":
        logger.warning(
            "lease lost (worker id %s, %s): %s; refusing ids and leasing again",
            worker_id,
            coordinator,
            detail,
            extra=fields,
        )
    elif kind == "attempt_failed":
        logger.warning(
            "leasing again failed (%s): %s; next attempt in %s ms",
            coordinator,
            detail,
            retry_in_ms,
            extra=fields,
        )
    else:
        logger.info("leased worker id %s again (%s)", worker_id, coordinator, extra=fields)
