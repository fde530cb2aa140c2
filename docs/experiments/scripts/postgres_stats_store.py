"""Fill a schema of the server at ``ANAMNESIS_TEST_POSTGRES_URL`` with ROWS synthetic
episodes of one user in sessions of 100 turns (random 256-d vectors, HNSW built after
the load), VACUUM ANALYZE it and print its URL: the PostgreSQL store the study
"PostgreSQL kill loop and stats at scale" times ``stats`` on.

    python docs/experiments/scripts/postgres_stats_store.py ROWS SCHEMA

Run from the repository root (it borrows the tests' URL helper).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg

from anamnesis.store.postgres import PostgresStore
from anamnesis.types import Episode

sys.path.insert(0, "tests")
from store_fixtures import with_search_path  # noqa: E402

DIM = 256
BATCH = 1000


def main() -> None:
    rows, schema = int(sys.argv[1]), sys.argv[2]
    base = os.environ["ANAMNESIS_TEST_POSTGRES_URL"]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    url = with_search_path(base, schema)
    store = PostgresStore(url, dim=DIM)
    rng = np.random.default_rng(0)
    start_time = datetime(2024, 1, 1, tzinfo=UTC)
    started = time.perf_counter()
    with store.bulk_load(build_memory="1GB"):
        for start in range(0, rows, BATCH):
            episodes = [
                Episode(
                    id=f"ep{i:09d}",
                    user_id="scale",
                    agent_id=None,
                    session_id=f"s{i // 100}",
                    role="user",
                    speaker=None,
                    content=f"note {i} about topic {i % 997}",
                    modality="text",
                    event_time=start_time + timedelta(minutes=i),
                    recorded_at=start_time + timedelta(minutes=i),
                    metadata={},
                    content_hash=f"h{i}",
                    turn_index=i % 100,
                )
                for i in range(start, min(rows, start + BATCH))
            ]
            vectors = rng.normal(size=(len(episodes), DIM)).astype(np.float32)
            store.insert_episodes(episodes, vectors / np.linalg.norm(vectors, axis=1)[:, None])
    print(f"loaded {rows} in {time.perf_counter() - started:.0f} s", flush=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) episodes")
    store.close()
    print(url)


if __name__ == "__main__":
    main()
