"""Rows written through the driver (`insert_new_rows`, `db_time`) read back as the ORM's own, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError

from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.models import LogLineRow, Node
from server.store.upsert import db_time, insert_new_rows

COLUMNS = ("node_id", "stream", "seq", "ts", "text")
KEY = ("node_id", "stream", "seq")
# Whole seconds (the microseconds an isoformat would drop), fractions, and the far side of 2038.
TIMES = (1_795_000_000.0, 1_795_000_000.5, 1_795_000_000.000001, 1_795_000_059.999999, 2_200_000_000.25)


def _node(session, name: str = "n1") -> int:  # type: ignore[no-untyped-def]
    node = Node(name=name)
    session.add(node)
    session.flush()
    return node.id


def test_a_time_written_through_the_driver_is_stored_as_the_orm_stores_it(db_url: str) -> None:
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        node = _node(session)
        for seq, ts in enumerate(TIMES):
            session.add(LogLineRow(node_id=node, stream="orm", seq=seq, ts=datetime.fromtimestamp(ts, UTC), text="x"))
        at = db_time(session)
        insert_new_rows(
            session, LogLineRow.__table__, COLUMNS, [(node, "raw", s, at(ts), "x") for s, ts in enumerate(TIMES)], KEY
        )
    with sessions() as session:
        stored = {(r.stream, r.seq): r.ts for r in session.scalars(select(LogLineRow))}
        as_text = dict(
            ((stream, seq), str(ts))
            for stream, seq, ts in session.execute(text("SELECT stream, seq, CAST(ts AS TEXT) FROM log_lines"))
        )
    engine.dispose()
    for seq, ts in enumerate(TIMES):
        assert stored["raw", seq] == stored["orm", seq] == datetime.fromtimestamp(ts, UTC)
        assert as_text["raw", seq] == as_text["orm", seq]  # the same text: comparisons in SQL agree


def test_only_the_rows_inserted_now_come_back(db_url: str) -> None:
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        node = _node(session)
        at = db_time(session)
        first = insert_new_rows(
            session, LogLineRow.__table__, COLUMNS, [(node, "s", n, at(1.8e9), f"l{n}") for n in range(3)], KEY
        )
        again = insert_new_rows(
            session, LogLineRow.__table__, COLUMNS, [(node, "s", n, at(1.8e9), "other") for n in range(1, 5)], KEY
        )
        assert sorted(first) == [(node, "s", 0), (node, "s", 1), (node, "s", 2)]
        assert sorted(again) == [(node, "s", 3), (node, "s", 4)]
        # More rows than one statement carries: each statement's new rows, none lost between them.
        many = [(node, "m", n, at(1.8e9), "x") for n in range(1_234)]
        assert len(insert_new_rows(session, LogLineRow.__table__, COLUMNS, many, KEY)) == 1_234
    with sessions() as session:
        rows = session.execute(select(LogLineRow.seq, LogLineRow.text).where(LogLineRow.stream == "s")).all()
        texts = {seq: line for seq, line in rows}
    engine.dispose()
    assert texts == {0: "l0", 1: "l1", 2: "l2", 3: "other", 4: "other"}  # the first copy kept


def test_a_driver_error_is_sqlalchemys_and_rolls_the_transaction_back(db_url: str) -> None:
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    with pytest.raises(IntegrityError), transaction(sessions) as session:  # the app's handlers know these
        node = _node(session)
        insert_new_rows(
            session, LogLineRow.__table__, COLUMNS, [(node + 1000, "s", 0, db_time(session)(1.8e9), "x")], KEY
        )
    with sessions() as session:
        assert session.scalar(select(LogLineRow.id)) is None
        assert session.scalar(select(Node.id)) is None
    engine.dispose()
