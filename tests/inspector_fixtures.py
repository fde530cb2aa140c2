"""A store worth inspecting and a real server serving it, for the inspector's tests.

Two users: ``ana`` (two sessions, a fact that changed, a hostile memory) and ``bob``
(a secret ana's key must never show). Keys: an admin, one for ana, one for bob.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from rest_fixtures import EDGE, RestServer

from anamnesis import Memory
from anamnesis.server.keys import KeyStore

HOSTILE = "<script>alert(1)</script> and <img src=x onerror=alert(2)>"
BOB_SECRET = "the vault code is 4411"


@dataclass
class Inspected:
    """The seeded store, its server and the keys that reach it."""

    path: Path
    server: RestServer
    admin: str
    ana: str
    bob: str

    def memory(self) -> Memory:
        """A second Memory on the same file, to see what the pages changed."""
        return Memory(path=self.path, embedder=EDGE, warm=False)


def seed(path: Path) -> None:
    with Memory(path=path, embedder=EDGE, warm=False, gate="lenient") as memory:
        memory.add(
            [
                {"role": "user", "content": "I live in Lisbon, near the river."},
                {"role": "assistant", "content": "Lisbon is lovely in spring."},
            ],
            user_id="ana",
            session_id="trip-2024",
            event_time="2024-03-01T10:00:00Z",
        )
        memory.add(
            [
                {"role": "user", "content": "I live in Porto now, I moved last month."},
                {"role": "user", "content": "My dog is called Biscuit."},
            ],
            user_id="ana",
            session_id="move",
            event_time="2024-09-02T09:30:00Z",
        )
        memory.add(HOSTILE, user_id="ana", session_id="move", event_time="2024-09-03T09:30:00Z")
        memory.add(f"Bob's secret: {BOB_SECRET}", user_id="bob", session_id="b1")
        memory.consolidate(user_id="ana")


def start(tmp: Path) -> Inspected:
    path = tmp / "inspected.db"
    seed(path)
    keys = KeyStore(tmp / "keys.db")
    _, admin = keys.create("admin", user_id=None)
    _, ana = keys.create("ana", user_id="ana")
    _, bob = keys.create("bob", user_id="bob")
    keys.close()
    server = RestServer({"path": path}, keys=tmp / "keys.db")
    return Inspected(path, server, admin, ana, bob)


def csrf_of(html: str) -> str:
    """The CSRF token of the first form on a page."""
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html
    return found.group(1)


@contextmanager
def logged_in(url: str, key: str) -> Iterator[httpx.Client]:
    """An HTTP client whose cookies hold ``key``, as the login form leaves them."""
    with httpx.Client(base_url=url, timeout=30) as client:
        page = client.get("/ui/login")
        done = client.post("/ui/login", data={"key": key, "csrf": csrf_of(page.text)})
        assert done.status_code == 303, done.text
        yield client
