"""Kill loops of the reliability harness on PostgreSQL, each workload in a fresh schema
of the server at ``ANAMNESIS_TEST_POSTGRES_URL`` (dropped afterwards); one JSON line
per workload. The study "PostgreSQL kill loop and stats at scale".

    python docs/experiments/scripts/postgres_kill_soak.py OUT_DIR KILLS index,add,...

Run from the repository root (it borrows the tests' URL helper).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import psycopg

from anamnesis.bench.reliability import run_kills

sys.path.insert(0, "tests")
from store_fixtures import with_search_path  # noqa: E402


def main() -> None:
    base = os.environ["ANAMNESIS_TEST_POSTGRES_URL"]
    out, kills, workloads = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
    for number, workload in enumerate(workloads, 1):
        schema = f"soak_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            directory = out / workload
            shutil.rmtree(directory, ignore_errors=True)
            url = with_search_path(base, schema)
            report = run_kills(directory, workload, kills, seed=number + 40, url=url)
            print(
                json.dumps(
                    {
                        "workload": workload,
                        "kills": report.kills,
                        "acknowledged": report.acknowledged,
                        "deleted": report.deleted,
                        "left_pending": report.left_pending,
                        "seconds": round(report.seconds),
                        "problems": report.problems[:10],
                    }
                ),
                flush=True,
            )
        finally:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
