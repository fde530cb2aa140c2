"""How long the memory inspector's pages take on a large store (``anamnesis bench
inspector``): each view fetched through ``anamnesis serve`` on 127.0.0.1, logged in
with an admin key as a browser is, timed from the request to the last byte of HTML.

The store is the surface benchmarks' (``surfaces.build_store``: LoCoMo turns in one
user's scope, a session per pass over the data set, so a session holds thousands of
turns); the searches are LoCoMo's questions. A session is timed at its first page and
at its last (the deepest offset), the scope view at its first page.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx

from .metrics import percentile
from .surfaces import USER


@dataclass(frozen=True, slots=True)
class PageTimes:
    """One view's render times over ``samples`` fetches."""

    view: str
    samples: int
    p50: float
    p95: float
    bytes: int


def _login(client: httpx.Client, key: str) -> None:
    page = client.get("/ui/login")
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    if token is None:
        raise RuntimeError("the login page carries no CSRF token")
    done = client.post("/ui/login", data={"key": key, "csrf": token.group(1)})
    if done.status_code != 303:
        raise RuntimeError(f"the login failed: {done.status_code}")


def _time(client: httpx.Client, view: str, paths: list[str]) -> PageTimes:
    client.get(paths[0])  # the first fetch warms the reader threads
    samples, size = [], 0
    for path in paths:
        start = time.perf_counter()
        answer = client.get(path)
        samples.append((time.perf_counter() - start) * 1000)
        if answer.status_code != 200:
            raise RuntimeError(f"{path} answered {answer.status_code}")
        size = len(answer.content)
    return PageTimes(view, len(samples), percentile(samples, 50), percentile(samples, 95), size)


def render_times(url: str, key: str, questions: list[str], renders: int) -> list[PageTimes]:
    """Each view's render times, ``renders`` fetches each (searches: that many
    distinct questions)."""
    with httpx.Client(base_url=url, timeout=120) as client:
        _login(client, key)
        user = quote(USER)
        scope = client.get(f"/ui/scope?user={user}").text
        session = re.search(r'class="session-link" href="([^"]+)"', scope)
        if session is None:
            raise RuntimeError("the scope view lists no session: is the store empty?")
        first = session.group(1).replace("&amp;", "&")
        page = client.get(first).text
        total = int(re.search(r"of (\d+)</span>", page).group(1))  # type: ignore[union-attr]
        last = f"{first}&offset={max(total - 50, 0)}"
        episode = re.search(r'class="episode-link" href="([^"]+)"', page)
        assert episode is not None
        views: list[tuple[str, Callable[[int], str]]] = [
            ("scope (sessions, first page)", lambda i: f"/ui/scope?user={user}"),
            (f"session timeline, first page ({total} turns)", lambda i: first),
            ("session timeline, last page", lambda i: last),
            ("episode (versions, gate, usage, strength)", lambda i: episode.group(1)),
            (
                "search with explanations (20 hits)",
                lambda i: f"/ui/search?user={user}&q={quote(questions[i % len(questions)])}",
            ),
            ("facts", lambda i: f"/ui/facts?user={user}"),
            ("health and capabilities", lambda i: "/ui/health"),
        ]
        return [
            _time(client, name, [path(i).replace("&amp;", "&") for i in range(renders)])
            for name, path in views
        ]


def run_inspector(
    data: Path, store: Path, episodes: int, embedder: str, renders: int
) -> list[PageTimes]:
    """Build (or reuse) the store, serve it, and time each view."""
    from .rest import served
    from .surfaces import build_store

    questions = build_store(data, store, episodes, embedder)
    with served(store, embedder, store.parent) as (url, key):
        return render_times(url, key, questions, renders)
