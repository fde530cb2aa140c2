"""One behaviour on every surface: Memory, AsyncMemory, and the REST clients
(RemoteMemory, AsyncRemoteMemory) against a real uvicorn on 127.0.0.1, answer alike.

The behavioural suite below runs against each surface through a thin adapter that
calls a verb by name (awaiting it on the async ones). The MCP server, whose answers
are text for a model, is held to the same answers in tests/server/test_mcp.py.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (a fixture by name)

from anamnesis import AsyncMemory, InvalidInputError, Memory, NotFoundError, ScopeError
from anamnesis.embed import get_embedder
from anamnesis.memory.derived import DerivedView

EDGE = get_embedder("edge")
#: What only the process holding the store can offer: the clients leave them out.
LOCAL_ONLY = {"store", "embedder"}


def _public_methods(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and inspect.isfunction(member)
    }


def test_async_memory_has_every_verb_with_the_same_signature() -> None:
    sync, asynchronous = _public_methods(Memory), _public_methods(AsyncMemory)
    assert set(sync) == set(asynchronous) - {"memory"}
    for name, method in sync.items():
        assert inspect.iscoroutinefunction(asynchronous[name]), name
        assert inspect.signature(asynchronous[name]) == inspect.signature(method), name
    for name in ("capabilities", "store", "embedder"):
        assert isinstance(inspect.getattr_static(AsyncMemory, name), property)


def test_the_rest_clients_have_every_verb_with_the_same_signature() -> None:
    from anamnesis.server.async_client import AsyncRemoteMemory
    from anamnesis.server.client import RemoteMemory

    sync = _public_methods(Memory)
    for client, is_async in ((RemoteMemory, False), (AsyncRemoteMemory, True)):
        methods = _public_methods(client)
        assert set(methods) == set(sync), client.__name__
        for name, method in sync.items():
            assert inspect.iscoroutinefunction(methods[name]) == is_async, name
            assert inspect.signature(methods[name]) == inspect.signature(method), name
        assert isinstance(inspect.getattr_static(client, "capabilities"), property)
        assert not any(hasattr(client, name) for name in LOCAL_ONLY)


#: Parameters a request does not carry as a field: a callback stays with the caller, the
#: export and the import are the response and request bodies, an id is in the path.
NOT_REQUEST_FIELDS = {"self", "progress", "out", "lines", "episode_id"}


def test_the_rest_server_takes_every_keyword_of_every_verb_with_its_default() -> None:
    from anamnesis.server import rest_arguments
    from anamnesis.server.wire import ROUTES

    verbs = {
        **_public_methods(Memory),
        **{f"derived.{n}": m for n, m in _public_methods(DerivedView).items()},
    }
    for route in ROUTES:
        if route == "capabilities":  # a property: nothing to pass
            continue
        name = "".join(part.title() for part in route.rsplit(".", 1)[-1].split("_")) + "Arguments"
        model = getattr(rest_arguments, name)
        parameters = {
            p.name: p
            for p in inspect.signature(verbs[route]).parameters.values()
            if p.name not in NOT_REQUEST_FIELDS
        }
        assert set(model.model_fields) == set(parameters), route
        for field, parameter in parameters.items():
            if field in ("user_id", "agent_id", "session_id"):  # a key may supply the scope
                assert model.model_fields[field].default is None, (route, field)
            elif parameter.default is inspect.Parameter.empty:
                assert model.model_fields[field].is_required(), (route, field)
            else:
                assert model.model_fields[field].default == parameter.default, (route, field)


def test_every_surface_offers_the_derived_views_with_the_same_signatures() -> None:
    from anamnesis.memory.async_verbs import AsyncDerivedView
    from anamnesis.server.async_client import AsyncRemoteMemory
    from anamnesis.server.client import RemoteMemory
    from anamnesis.server.remote_verbs import AsyncRemoteDerivedView, RemoteDerivedView

    views = _public_methods(DerivedView)
    assert set(views) == {"summaries", "profiles", "profile"}
    for surface, view, is_async in (
        (AsyncMemory, AsyncDerivedView, True),
        (RemoteMemory, RemoteDerivedView, False),
        (AsyncRemoteMemory, AsyncRemoteDerivedView, True),
    ):
        derived = inspect.getattr_static(surface, "derived")
        assert isinstance(derived, property), surface.__name__
        assert inspect.get_annotations(derived.fget, eval_str=True)["return"] is view
        methods = _public_methods(view)
        assert set(methods) == set(views), view.__name__
        for name, method in views.items():
            assert inspect.iscoroutinefunction(methods[name]) == is_async, name
            assert inspect.signature(methods[name]) == inspect.signature(method), name


class Surface:
    """Calls a verb by name on one surface and returns its plain result."""

    def __init__(self, where: dict[str, Any], kind: str) -> None:
        self.kind = kind
        self.server: Any = None
        self.runner: asyncio.Runner | None = None
        if kind == "memory":
            self.target: Any = Memory(**where, embedder=EDGE, warm=False)
        elif kind == "remote":
            from rest_fixtures import RestServer

            from anamnesis.server.client import RemoteMemory

            self.server = RestServer(where)
            self.target = RemoteMemory(self.server.url)
        else:
            self.runner = asyncio.Runner()
            self.target = self.runner.run(self._open_async(where, kind))

    async def _open_async(self, where: dict[str, Any], kind: str) -> Any:
        if kind == "async":
            return AsyncMemory(**where, embedder=EDGE, warm=False)
        from rest_fixtures import RestServer

        from anamnesis.server.async_client import AsyncRemoteMemory

        self.server = RestServer(where)
        return await AsyncRemoteMemory(self.server.url).__aenter__()

    def __call__(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        """``verb`` by name; a dotted name reaches a view (``derived.summaries``)."""
        result = functools.reduce(getattr, verb.split("."), self.target)(*args, **kwargs)
        if self.runner is not None:
            return self.runner.run(result)
        return result

    def close(self) -> None:
        self("close")
        if self.runner is not None:
            self.runner.close()
        if self.server is not None:
            self.server.stop()


@pytest.fixture(
    params=["memory", "async", "async-postgres", "remote", "async-remote", "remote-postgres"]
)
def surface(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Surface]:
    kind = request.param
    if kind.endswith("postgres"):
        where: dict[str, Any] = {"url": request.getfixturevalue("postgres_schema_url")}
    else:
        where = {"path": tmp_path / "m.db"}
    opened = Surface(where, kind.removesuffix("-postgres"))
    yield opened
    opened.close()


CHAT = [
    {"role": "user", "speaker": "Maya", "content": "I finally signed the lease on a flat in Porto"},
    {"role": "assistant", "content": "Congratulations! When do you move?"},
    {"role": "user", "speaker": "Maya", "content": "My sister Inês is allergic to cats"},
    {"role": "user", "speaker": "Maya", "content": "I work at Acme as a designer"},
]


def test_add_search_context_update_history_delete(surface: Surface) -> None:
    added = surface("add", CHAT, user_id="maya", session_id="s1", event_time="2024-03-02T09:15:00Z")
    assert [e.content for e in added] == [m["content"] for m in CHAT]
    hits = surface("search", "lease on a flat in Porto", user_id="maya", limit=3)
    assert hits[0].episode.id == added[0].id
    context = surface("context", "where does Maya live?", user_id="maya")
    assert "Porto" in context.text
    updated = surface(
        "update", added[3].id, content="I work at Globex as a designer", user_id="maya"
    )
    assert updated.version == 2
    versions = surface("history", added[3].id, user_id="maya")
    assert [v.content for v in versions][0] == "I work at Acme as a designer"
    counts = surface("delete", added[2].id, user_id="maya")
    assert counts.episodes == 1
    with pytest.raises(NotFoundError):
        surface("get", added[2].id, user_id="maya")


def test_facts_after_consolidation(surface: Surface) -> None:
    surface("add", ["I live in Porto", "I work at Acme"], user_id="maya")
    report = surface("consolidate", user_id="maya")
    assert report.added >= 2
    predicates = {f.predicate for f in surface("facts", user_id="maya")}
    assert {"lives_in", "works_at"} <= predicates
    assert [f.object for f in surface("fact_history", predicate="works_at", user_id="maya")] == [
        "Acme"
    ]


def test_summaries_and_profiles_after_consolidation(surface: Surface) -> None:
    added = surface("add", CHAT, user_id="maya", session_id="s1", event_time="2024-03-02T09:15:00Z")
    surface("add", "I live in Porto", user_id="maya", session_id="s2")
    assert surface("derived.summaries", user_id="maya") == []
    assert surface("derived.profile", "user", user_id="maya") is None
    report = surface("consolidate", user_id="maya")
    assert report.summaries == 2 and report.profiles >= 1
    summaries = surface("derived.summaries", user_id="maya")
    assert [s.session_id for s in summaries] == ["s1", "s2"]
    assert set(summaries[0].provenance) <= {e.id for e in added}
    assert surface("derived.summaries", user_id="maya", session_id="s2") == summaries[1:]
    profile = surface("derived.profile", "user", user_id="maya")
    assert profile is not None and "Porto" in profile.text
    assert profile in surface("derived.profiles", user_id="maya")
    assert surface("derived.summaries", user_id="bob") == []
    assert surface("derived.profiles", user_id="bob") == []
    with pytest.raises(InvalidInputError, match="subject is empty"):
        surface("derived.profile", "  ", user_id="maya")


def test_pages_cover_every_episode_once(surface: Surface) -> None:
    surface("add_many", [f"note {i}" for i in range(25)], user_id="maya")
    seen, offset = [], 0
    while offset is not None:
        page = surface("get_all", user_id="maya", limit=10, offset=offset)
        seen += [e.id for e in page.items]
        offset = page.next_offset
    assert len(seen) == len(set(seen)) == 25


def test_scope_isolation(surface: Surface) -> None:
    (secret,) = surface("add", "my locker code is 4471", user_id="ana")
    assert surface("search", "locker code", user_id="bob") == []
    with pytest.raises(NotFoundError):
        surface("get", secret.id, user_id="bob")
    with pytest.raises(NotFoundError):
        surface("delete", secret.id, user_id="bob")
    assert surface("stats", user_id="ana")["episodes"] == 1


def test_bad_input_is_the_same_typed_error(surface: Surface) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        surface("add", "   ", user_id="maya")
    with pytest.raises(ScopeError):
        surface("search", "anything", user_id="a\nb")
    with pytest.raises(InvalidInputError, match="limit"):
        surface("search", "anything", user_id="maya", limit=0)
    assert surface("stats")["episodes"] == 0


def test_async_memory_never_blocks_the_event_loop(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int]:
        ticks = 0
        done = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        async with AsyncMemory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
            beat = asyncio.create_task(heartbeat())
            await memory.add_many([f"turn {i} about the harbour" for i in range(300)], user_id="u")
            results = await asyncio.gather(
                *(memory.search(f"harbour {i}", user_id="u") for i in range(20))
            )
            done.set()
            await beat
        return ticks, sum(1 for hits in results if hits)

    ticks, answered = asyncio.run(scenario())
    assert answered == 20
    assert ticks > 5  # the loop kept running while the work ran on threads


def test_a_closed_async_memory_refuses_work(tmp_path: Path) -> None:
    async def scenario() -> None:
        memory = AsyncMemory(path=tmp_path / "m.db", embedder=EDGE, warm=False)
        await memory.close()
        await memory.close()
        with pytest.raises(InvalidInputError, match="closed"):
            await memory.search("anything")

    asyncio.run(scenario())


def test_forget_archive_and_restore(surface: Surface) -> None:
    from anamnesis.decay import DecayPolicy

    kept, secret, old = surface(
        "add",
        ["I live in Porto", "my locker code is 4471", "I keep bees on the roof"],
        user_id="maya",
        session_id="s1",
    )
    trial = surface("forget", containing="4471", user_id="maya", dry_run=True)
    assert trial.episode_ids == (secret.id,) and trial.dry_run
    assert surface("get", secret.id, user_id="maya").content == secret.content
    report = surface("forget", containing="4471", user_id="maya")
    assert report.counts.episodes == 1 and not report.dry_run
    with pytest.raises(NotFoundError):
        surface("get", secret.id, user_id="maya")
    assert surface("archive", [old.id], user_id="maya") == [old.id]
    assert old.id not in [h.episode.id for h in surface("search", "bees roof", user_id="maya")]
    found = surface("search", "bees roof", user_id="maya", include_archive=True)
    assert old.id in [h.episode.id for h in found]
    assert surface("restore", old.id, user_id="maya") == [old.id]
    assert surface("get", old.id, user_id="maya") == old
    assert set(surface("usage", [kept.id, old.id], user_id="maya")) <= {kept.id, old.id}
    policy = DecayPolicy(base_stability_days=1.0)
    strengths = surface("strength", [kept.id], user_id="maya", policy=policy)
    assert 0.0 <= strengths[kept.id] <= 1.0
    faded = surface("decay", user_id="maya", dry_run=True, now="2030-01-01", policy=policy)
    assert set(faded) == {kept.id, old.id}


def test_wait_indexed_answers_on_every_surface(surface: Surface) -> None:
    surface("add", "a note with its vector", user_id="maya")
    assert surface("wait_indexed", timeout=5) is True
    assert surface("wait_indexed") is True
    with pytest.raises(InvalidInputError, match="timeout"):
        surface("wait_indexed", timeout=-1)
