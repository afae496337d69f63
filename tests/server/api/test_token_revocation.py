"""A revoked node token stops ingesting within a watchdog period on every replica, however long the
token cache would have trusted it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, LogLine
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.migrate import upgrade
from server.store.nodes import revoke_tokens
from tests.helpers import InProcessServer, new_token, wait_until


def _ingest(url: str, token: str, batch_id: int) -> int:
    batch = Batch(batch_id=batch_id, logs=[LogLine(stream="file:/x.log", seq=batch_id, ts=time.time(), text="hi")])
    resp = httpx.post(
        f"{url}/api/v1/ingest",
        content=batch.model_dump_json(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=10,
    )
    return resp.status_code


def test_a_revoked_token_is_refused_by_both_replicas_within_seconds(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/gw.db"
    # An hour's cache: only the revocation check can make the replicas forget the token in time.
    settings = Settings(data_dir=tmp_path, database_url=url, token_cache_s=3600, hang_check_s=0.5)
    upgrade(url)
    token = new_token(url, "node-a")
    with InProcessServer(settings) as one, InProcessServer(settings) as two:
        assert _ingest(one.url, token, 1) == 200
        assert _ingest(two.url, token, 2) == 200  # both replicas have the token cached now
        engine = make_engine(url)
        try:
            with transaction(make_sessionmaker(engine)) as session:
                assert revoke_tokens(session, "node-a") == 1
        finally:
            engine.dispose()
        revoked_at = time.monotonic()
        for replica, first_id in ((one, 10), (two, 1000)):
            ids = iter(range(first_id, first_id + 10_000))
            wait_until(
                lambda r=replica, ids=ids: _ingest(r.url, token, next(ids)) == 401,
                timeout=10,
                what=f"replica {replica.url} to refuse the revoked token",
                every=0.1,
            )
        assert time.monotonic() - revoked_at < 10  # not the hour the cache would have trusted it
