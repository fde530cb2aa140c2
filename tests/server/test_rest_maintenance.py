"""The REST server keeps taking notes while it decays a large scope: ``AsyncMemory``
runs the decay on its maintenance thread, and the note's add is applied between two of
the decay's batches. A real uvicorn on 127.0.0.1 (tests/rest_fixtures.py), spoken to
with httpx."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
from rest_fixtures import EDGE, RestServer

from anamnesis import Memory
from anamnesis.store.shared.forget import EPISODE_BATCH

#: Seven batches of a move.
SCOPE_SIZE = 6 * EPISODE_BATCH + 1


def _hot(server: RestServer, user_id: str) -> int:
    response = httpx.get(f"{server.url}/v1/stats", params={"user_id": user_id}, timeout=30)
    assert response.status_code == 200, response.text
    return int(response.json()["episodes"])


def test_a_note_posted_during_a_long_decay_is_answered_while_the_decay_runs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        memory.add_many(
            [f"turn {i}: the harbour crane lifted crate {i}" for i in range(SCOPE_SIZE)],
            user_id="ana",
        )
    server = RestServer({"path": path})
    try:
        decayed: dict[str, Any] = {}

        def decay() -> None:
            # Three years on, every episode never retrieved has faded.
            decayed["response"] = httpx.post(
                f"{server.url}/v1/decay", json={"user_id": "ana", "now": "2030-01-01"}, timeout=300
            )

        running = threading.Thread(target=decay)
        running.start()
        deadline = time.monotonic() + 60
        while _hot(server, "ana") == SCOPE_SIZE:  # until its first batch has moved
            assert time.monotonic() < deadline, "the decay never started"
            time.sleep(0.02)

        note = httpx.post(
            f"{server.url}/v1/episodes",
            json={"content": "a note taken while the decay runs", "user_id": "ana"},
            timeout=300,
        )
        still_hot = _hot(server, "ana")
        running.join(300)

        assert note.status_code == 201, note.text
        # Answered while old episodes were still waiting for their batch: not after.
        assert still_hot > 1 + EPISODE_BATCH
        assert decayed["response"].status_code == 200, decayed["response"].text
        assert len(decayed["response"].json()) == SCOPE_SIZE
        page = httpx.get(f"{server.url}/v1/episodes", params={"user_id": "ana"}, timeout=30)
        assert [e["id"] for e in page.json()["items"]] == [note.json()[0]["id"]]
    finally:
        server.stop()
