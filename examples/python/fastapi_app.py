"""FastAPI + SQLAlchemy 2 + PostgreSQL: the app makes the ids, clients get them as strings.

Run: DATABASE_URL=postgresql+psycopg://app@db/app CLOCKFLAKE_URI=file:///var/lib/myapp/ids?app=orders
     uvicorn fastapi_app:app
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from clockflake import CoordinatorUnavailableError, Generator, id_range
from clockflake.pydantic import Id
from fastapi import FastAPI, HTTPException, Response
from pydantic import BaseModel
from sqlalchemy import BigInteger, String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    # BIGINT, and no sequence: the id comes from clockflake.
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    item: Mapped[str] = mapped_column(String(100))


class OrderIn(BaseModel):
    item: str


class OrderOut(BaseModel):
    id: Id  # an int in Python, a decimal string in JSON: JavaScript clients read it exactly
    item: str


engine = create_engine(os.environ["DATABASE_URL"])


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Opened per process at start-up (after any fork), closed at shutdown (SIGTERM: Uvicorn stops
    # accepting, finishes the requests in flight, then leaves this block): the worker id is
    # leased for as long as this process serves, and released with its high-water marks.
    # open_async and `async with` (close_async) wait for the coordinator on a worker thread,
    # so nothing else on the event loop stalls meanwhile.
    Base.metadata.create_all(engine)
    async with await Generator.open_async(os.environ["CLOCKFLAKE_URI"]) as ids:
        app.state.ids = ids
        yield


app = FastAPI(lifespan=lifespan)


@app.get("/readyz")
def readyz(response: Response) -> dict[str, object]:
    """Readiness: 200 while the generator holds its lease, else 503 with the reason. Unready
    while a lost lease is leased again (state "healing"), ready again after it, no restart."""
    if not app.state.ids.is_active:
        response.status_code = 503
    stats = app.state.ids.stats()
    return {
        "state": stats["state"],  # "active", "healing" or "closed"
        "worker_id": stats["worker_id"],  # None while healing
        "last_loss": stats["last_loss"],  # why the lease was lost, if it was
        "last_heal_error": stats["last_heal_error"],  # why leasing again failed, if it did
    }


@app.post("/orders", response_model=OrderOut)
def create_order(order: OrderIn) -> Order:
    try:
        order_id = app.state.ids.next_id()
    except CoordinatorUnavailableError as error:
        # The lease's reservation is not persisted yet (a slow coordinator): ask the client to
        # come back, rather than answer 500. retry_at_ms says when a retry can succeed.
        retry_after_s = max(1, round((error.retry_at_ms or 0) / 1000 - time.time()))
        raise HTTPException(503, str(error), headers={"Retry-After": str(retry_after_s)}) from None
    with Session(engine, expire_on_commit=False) as session:
        row = Order(id=order_id, item=order.item)
        session.add(row)
        session.commit()
        return row


@app.get("/orders/{order_id}", response_model=OrderOut)
def get_order(order_id: Id) -> Order:  # the path's decimal string, checked, as an int
    with Session(engine) as session:
        row = session.get(Order, order_id)
        if row is None:
            raise HTTPException(404, "no such order")
        return row


@app.get("/orders", response_model=list[OrderOut])
def orders_between(from_ms: int, to_ms: int) -> list[Order]:
    """Orders made in a time window: ids sort by time, so this is a primary-key range scan."""
    low, high = id_range(from_ms, to_ms)
    with Session(engine) as session:
        query = select(Order).where(Order.id.between(low, high)).order_by(Order.id)
        return list(session.scalars(query))
