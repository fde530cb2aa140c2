"""The REST server under attack and in use: keys, scope, bounds, errors, logs, CORS,
and the same answers as Memory in process. Every test runs a real uvicorn on
127.0.0.1 (tests/rest_fixtures.py) and speaks HTTP to it with httpx or the clients."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from rest_fixtures import EDGE, RestServer, documented_errors, free_port

from anamnesis import Memory
from anamnesis.errors import (
    AuthenticationError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
)
from anamnesis.server import ServerLimits
from anamnesis.server.client import RemoteMemory
from anamnesis.server.keys import KeyStore
from anamnesis.types import ContextFact

SECRET = "zanzibar-7731"
NOW = "2024-06-01T12:00:00Z"
FACTS = [ContextFact("Maya lives in Porto", datetime(2024, 3, 2, tzinfo=UTC), ("ep_1",))]


class Keys:
    """The key file's keys for the tests: Maya's, Bob's, an agent's and an admin's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        store = KeyStore(path)
        self.maya = store.create("maya's agent", user_id="maya")[1]
        self.bob = store.create("bob's agent", user_id="bob")[1]
        self.maya_planner = store.create("planner", user_id="maya", agent_id="planner")[1]
        self.admin = store.create("ops", user_id=None)[1]
        store.close()


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys.db")


@pytest.fixture
def server(tmp_path: Path, keys: Keys) -> Iterator[RestServer]:
    running = RestServer(
        {"path": tmp_path / "m.db"}, keys.path, ServerLimits(max_body_bytes=20_000)
    )
    yield running
    running.stop()


def _http(server: RestServer, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def _error(response: httpx.Response) -> tuple[int, str, str]:
    detail = response.json()["error"]
    return response.status_code, detail["type"], detail["message"]


def _bobs_secret(server: RestServer, keys: Keys) -> str:
    with RemoteMemory(server.url, api_key=keys.bob) as bob:
        (episode,) = bob.add(f"my locker code is {SECRET}", session_id="gym")
    return episode.id


def _bobs_episodes(server: RestServer, keys: Keys) -> list[str]:
    with RemoteMemory(server.url, api_key=keys.admin) as admin:
        return [e.content for e in admin.get_all(user_id="bob").items]


# -- keys --------------------------------------------------------------------------------
def test_every_request_needs_a_valid_key_once_keys_exist(server: RestServer, keys: Keys) -> None:
    with _http(server) as anonymous:
        assert anonymous.get("/health").json()["status"] == "ok"
        response = anonymous.post("/v1/search", json={"query": "locker"})
        assert _error(response)[:2] == (401, "AuthenticationError")
        assert response.headers["www-authenticate"] == "Bearer"
    for wrong in ("anm_0000_" + "x" * 43, "not-even-a-key", keys.maya[:-1]):
        with _http(server, wrong) as client:
            assert client.get("/v1/stats").status_code == 401
    with _http(server) as client:
        response = client.get("/v1/stats", headers={"X-API-Key": keys.maya})
        assert response.status_code == 200


def test_a_revoked_key_stops_working_at_once(server: RestServer, keys: Keys) -> None:
    with RemoteMemory(server.url, api_key=keys.maya) as maya:
        maya.add("I live in Porto")
        store = KeyStore(keys.path)
        key_id = next(k.id for k in store.list() if k.name == "maya's agent")
        store.revoke(key_id)
        store.close()
        with pytest.raises(AuthenticationError, match="revoked"):
            maya.search("Porto")


def test_the_key_file_holds_no_key_and_is_private(keys: Keys) -> None:
    raw = keys.path.read_bytes()
    for key in (keys.maya, keys.bob, keys.admin):
        assert key.encode() not in raw
        assert key.split("_", 2)[2].encode() not in raw
    assert stat.S_IMODE(keys.path.stat().st_mode) == 0o600


# -- scope ---------------------------------------------------------------------------------
def test_a_user_key_cannot_name_another_user(server: RestServer, keys: Keys) -> None:
    _bobs_secret(server, keys)
    with RemoteMemory(server.url, api_key=keys.maya) as maya:
        attempts = [
            lambda: maya.search("locker code", user_id="bob"),
            lambda: maya.context("locker code", user_id="bob"),
            lambda: maya.get_all(user_id="bob"),
            lambda: maya.stats(user_id="bob"),
            lambda: maya.facts(user_id="bob"),
            lambda: maya.export_jsonl(io.StringIO(), user_id="bob"),
            lambda: maya.add("planted", user_id="bob"),
            lambda: maya.import_jsonl(['{"type": "x"}'], user_id="bob"),
            lambda: maya.delete_all(user_id="bob"),
        ]
        for attempt in attempts:
            with pytest.raises(PermissionDeniedError, match="user 'maya'"):
                attempt()
    assert _bobs_episodes(server, keys) == [f"my locker code is {SECRET}"]


def test_another_users_episode_id_is_not_found(server: RestServer, keys: Keys) -> None:
    secret_id = _bobs_secret(server, keys)
    with RemoteMemory(server.url, api_key=keys.maya) as maya:
        for attempt in (
            lambda: maya.get(secret_id),
            lambda: maya.history(secret_id),
            lambda: maya.update(secret_id, content="overwritten"),
            lambda: maya.delete(secret_id),
        ):
            with pytest.raises(NotFoundError):
                attempt()
        assert maya.search("locker code") == []
    assert _bobs_episodes(server, keys) == [f"my locker code is {SECRET}"]


def test_export_and_import_stay_in_the_keys_scope(server: RestServer, keys: Keys) -> None:
    _bobs_secret(server, keys)
    with RemoteMemory(server.url, api_key=keys.maya) as maya:
        maya.add("I live in Porto")
        exported = io.StringIO()
        assert maya.export_jsonl(exported) == 1
        assert SECRET not in exported.getvalue()
    with RemoteMemory(server.url, api_key=keys.admin) as admin:
        everything = io.StringIO()
        admin.export_jsonl(everything, user_id="bob")
    lines = everything.getvalue().replace(SECRET, "copied-by-maya").splitlines()
    lines = [line.replace('"ep_', '"ep_x') for line in lines]  # new ids: not a re-import
    with RemoteMemory(server.url, api_key=keys.maya) as maya:
        assert maya.import_jsonl(lines) == 1  # a file naming bob lands in maya's scope
        assert {e.user_id for e in maya.get_all().items} == {"maya"}
    assert _bobs_episodes(server, keys) == [f"my locker code is {SECRET}"]


def test_an_agent_key_reaches_its_agent_only(server: RestServer, keys: Keys) -> None:
    with RemoteMemory(server.url, api_key=keys.maya) as maya:
        maya.add("the coach said to stretch daily", agent_id="coach")
    with RemoteMemory(server.url, api_key=keys.maya_planner) as planner:
        (mine,) = planner.add("book the dentist for Tuesday")
        assert mine.agent_id == "planner"
        assert [h.episode.id for h in planner.search("stretch daily dentist")] == [mine.id]
        with pytest.raises(PermissionDeniedError, match="agent 'planner'"):
            planner.search("stretch", agent_id="coach")
        with pytest.raises(PermissionDeniedError, match="every agent"):
            planner.stats()
        with pytest.raises(PermissionDeniedError, match="every agent"):
            planner.export_jsonl(io.StringIO())


def test_whole_store_verbs_need_an_admin_key(server: RestServer, keys: Keys) -> None:
    with RemoteMemory(server.url, api_key=keys.maya) as maya:
        with pytest.raises(PermissionDeniedError, match="admin"):
            maya.check()
        with pytest.raises(PermissionDeniedError, match="admin"):
            maya.reindex()
        assert maya.stats()["episodes"] == 0  # its own user's counts, not the store's
    with RemoteMemory(server.url, api_key=keys.admin) as admin:
        assert admin.check() == []


def test_a_user_keys_stats_are_its_own_scopes_only(
    server: RestServer, keys: Keys, tmp_path: Path
) -> None:
    _bobs_secret(server, keys)
    with _http(server, keys.maya) as maya:
        maya.post("/v1/episodes", json={"content": "I live in Porto"})
        mine = maya.get("/v1/stats").json()
    with _http(server, keys.admin) as admin:
        whole = admin.get("/v1/stats").json()
    assert (mine["episodes"], whole["episodes"]) == (1, 2)
    assert str(tmp_path) not in json.dumps(mine)
    assert not {"path", "file_bytes", "url", "table_bytes"} & mine.keys()
    assert whole["path"] == str(tmp_path / "m.db") and whole["file_bytes"] > 0


# -- bounds and malformed requests -------------------------------------------------------------
def test_an_oversized_body_is_413_and_stores_nothing(server: RestServer, keys: Keys) -> None:
    with RemoteMemory(server.url, api_key=keys.maya) as maya:
        with pytest.raises(PayloadTooLargeError, match="20000 bytes"):
            maya.add("harbour " * 5_000)
        with _http(server, keys.maya) as client:
            chunks = (b'{"content": "' + b"a" * 10_000 for _ in range(3))
            response = client.post("/v1/episodes", content=chunks)  # no Content-Length
            assert _error(response)[:2] == (413, "PayloadTooLargeError")
        assert maya.stats()["episodes"] == 0


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "JSON"),
        (b'{"query": "x", "user": "bob"}', "user"),
        (b'{"query": 5}', "query"),
        (b'{"query": "x", "limit": "5"}', "limit"),
        (b'{"query": "x", "limit": 0}', "limit"),
        (b'{"query": "   "}', "empty"),
        (b"[]", "dictionary"),
    ],
)
def test_a_malformed_request_is_400_with_a_clear_message(
    server: RestServer, keys: Keys, body: bytes, says: str
) -> None:
    with _http(server, keys.maya) as client:
        response = client.post(
            "/v1/search", content=body, headers={"Content-Type": "application/json"}
        )
    status, kind, message = _error(response)
    assert (status, kind) == (400, "InvalidInputError")
    assert says.lower() in message.lower()


DEEP = 15_000  # JSON nesting far past what a parser takes, under the body limit
HUGE = (2**63, 2**64, 2**70, -(2**63) - 1)
JSON = {"Content-Type": "application/json"}
ERROR_PATHS: list[tuple[str, str, dict[str, Any], int]] = [
    ("GET", "/v1/nowhere", {}, 404),
    ("GET", "/v1/episodes/ep_nope", {}, 404),
    ("PUT", "/v1/search", {}, 405),
    ("POST", "/v1/episodes", {"json": {"content": "harbour " * 5_000}}, 413),
    ("POST", "/v1/search", {"content": b"{not json", "headers": JSON}, 400),
    ("POST", "/v1/search", {"content": b'{"query": "caf\xe9"}', "headers": JSON}, 400),
    ("POST", "/v1/search", {"content": b"[" * DEEP, "headers": JSON}, 400),
    (
        "POST",
        "/v1/search",
        {"content": b'{"query": "x", "filters": ' + b'{"a": ' * 3_000, "headers": JSON},
        400,
    ),  # fmt: skip
    ("POST", "/v1/import", {"content": b"\xff\xfe\n"}, 400),
    ("GET", "/v1/episodes", {"params": {"filters": "[" * 5_000}}, 400),
    ("POST", "/v1/search", {"json": {"query": 5}}, 400),
    ("POST", "/v1/search", {"json": {"query": "x", "limit": True}}, 400),
    ("POST", "/v1/episodes", {"json": {"content": "x", "event_time": [1]}}, 400),
    ("GET", "/v1/episodes", {"params": {"limit": "many"}}, 400),
    ("POST", "/v1/search", {"json": {"query": "x", "user_id": "bob"}}, 403),
    *[("GET", "/v1/episodes", {"params": {"offset": n}}, 400) for n in HUGE],
    *[("GET", "/v1/facts", {"params": {"limit": n}}, 400) for n in HUGE],
    *[("POST", "/v1/search", {"json": {"query": "x", "limit": n}}, 400) for n in HUGE],
    *[("POST", "/v1/context", {"json": {"query": "x", "budget_tokens": n}}, 400) for n in HUGE],
    *[("POST", "/v1/consolidate", {"json": {"limit": n}}, 400) for n in HUGE],
    *[("POST", "/v1/episodes", {"json": {"content": "x", "event_time": n}}, 400) for n in HUGE],
]


@pytest.mark.parametrize(
    ("method", "path", "request_", "status"),
    ERROR_PATHS,
    ids=[f"{m} {p} {s} {i}" for i, (m, p, _, s) in enumerate(ERROR_PATHS)],
)
def test_every_error_body_carries_a_documented_type(
    server: RestServer, keys: Keys, method: str, path: str, request_: dict[str, Any], status: int
) -> None:
    with _http(server, keys.maya) as client:
        response = client.request(method, path, **request_)
    answered, kind, message = _error(response)
    assert answered == status, message
    assert kind in documented_errors(), (kind, message)
    assert message


def test_no_key_is_a_documented_401(server: RestServer) -> None:
    with _http(server) as client:
        answered, kind, _ = _error(client.get("/v1/stats"))
    assert answered == 401 and kind in documented_errors()


def test_every_error_class_is_in_the_guides_table() -> None:
    from anamnesis import errors

    classes = {
        name
        for name, kind in vars(errors).items()
        if isinstance(kind, type) and issubclass(kind, errors.AnamnesisError)
    }
    assert classes - {"AnamnesisError"} <= documented_errors()


def test_unknown_ids_and_routes_are_404(server: RestServer, keys: Keys) -> None:
    with _http(server, keys.maya) as client:
        assert _error(client.get("/v1/episodes/ep_nope"))[:2] == (404, "NotFoundError")
        assert _error(client.get("/v1/nowhere"))[:2] == (404, "NotFoundError")
        assert _error(client.put("/v1/search"))[:2] == (405, "InvalidInputError")


# -- logs, CORS, same answers ------------------------------------------------------------------
def test_one_log_line_per_request_without_memory_text(
    server: RestServer, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="anamnesis.server"):
        with RemoteMemory(server.url, api_key=keys.maya) as maya:
            (episode,) = maya.add(f"my locker code is {SECRET}")
            maya.search(f"locker {SECRET}")
            maya.get(episode.id)
            with pytest.raises(NotFoundError):
                maya.get("ep_missing")
        # A request's line is written once its response is sent: the client may read
        # the answer a moment before the server logs it.
        deadline = time.monotonic() + 5
        while len(_server_lines(caplog)) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
    lines = _server_lines(caplog)
    records = [json.loads(line) for line in lines]
    # One line per request; under load a line may be written after the next request's.
    assert sorted((r["method"], r["status"]) for r in records) == [
        ("GET", 200),
        ("GET", 404),
        ("POST", 200),
        ("POST", 201),
    ]
    assert {r["key"] for r in records} == {next(iter(k.id for k in _listed(keys, "maya's")))}
    assert all(SECRET not in line and "locker" not in line for line in lines)


def _server_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "anamnesis.server"]


def _listed(keys: Keys, name: str) -> list[Any]:
    store = KeyStore(keys.path)
    try:
        return [k for k in store.list() if k.name.startswith(name)]
    finally:
        store.close()


def test_cors_is_off_unless_an_origin_is_allowed(tmp_path: Path) -> None:
    preflight = {"Origin": "https://example.org", "Access-Control-Request-Method": "POST"}
    closed = RestServer({"path": tmp_path / "a.db"})
    opened = RestServer({"path": tmp_path / "b.db"}, cors_origins=("https://example.org",))
    try:
        refused = httpx.options(f"{closed.url}/v1/search", headers=preflight)
        allowed = httpx.options(f"{opened.url}/v1/search", headers=preflight)
    finally:
        closed.stop()
        opened.stop()
    assert "access-control-allow-origin" not in refused.headers
    assert allowed.headers["access-control-allow-origin"] == "https://example.org"


def test_remote_answers_are_memorys_answers(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    turns = [
        "I finally signed the lease on a flat in Porto",
        "My sister Inês is allergic to cats",
        "We adopted a grey kitten called Miso last spring",
        "The flat has a balcony over the river",
        "I work at Acme as a designer since March",
    ]
    questions = ["where does she live?", "any pets?", "what is her job?", "Inês cats"]
    with Memory(path=store, embedder=EDGE, warm=False) as memory:
        memory.add(turns, user_id="maya", session_id="s1", event_time="2024-03-02T09:15:00Z")
        local = [
            memory.search(q, user_id="maya", limit=3, explain=True, now=NOW) for q in questions
        ]
        local_context = memory.context(questions[0], user_id="maya", now=NOW, facts=FACTS)
    server = RestServer({"path": store})
    try:
        with RemoteMemory(server.url) as remote:
            answers = [
                remote.search(q, user_id="maya", limit=3, explain=True, now=NOW) for q in questions
            ]
            remote_context = remote.context(questions[0], user_id="maya", now=NOW, facts=FACTS)
    finally:
        server.stop()
    assert answers == local
    assert remote_context == local_context


# -- the command line ---------------------------------------------------------------------------
def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anamnesis.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_serve_refuses_a_public_address_without_keys(tmp_path: Path) -> None:
    result = _cli("--path", str(tmp_path / "m.db"), "serve", "--host", "0.0.0.0", "--keys",
                  str(tmp_path / "keys.db"))  # fmt: skip
    said = " ".join(result.stderr.split())
    assert result.returncode == 2
    assert "holds no key" in said and "anamnesis keys create" in said


def test_keys_and_serve_from_the_command_line(tmp_path: Path) -> None:
    key_file = str(tmp_path / "keys.db")
    created = _cli("keys", "--keys", key_file, "create", "--user", "maya", "--name", "laptop")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key.startswith("anm_")
    assert _cli("keys", "--keys", key_file, "create", "--admin", "--user", "x").returncode == 2
    listed = _cli("keys", "--keys", key_file, "list")
    assert "user maya" in listed.stdout and "active" in listed.stdout and key not in listed.stdout
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "anamnesis.cli", "--path", str(tmp_path / "m.db"),
         "--embedder", "edge", "serve", "--port", str(port), "--keys", key_file],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "ANAMNESIS_API_KEY": key},
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        with RemoteMemory(url, api_key=key) as maya:
            maya.add("I signed the lease on a flat in Porto")
            assert "Porto" in maya.search("flat lease")[0].episode.content
        key_id = key.split("_")[1]
        assert _cli("keys", "--keys", key_file, "revoke", key_id).returncode == 0
        with RemoteMemory(url, api_key=key) as maya, pytest.raises(AuthenticationError):
            maya.stats()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    logged = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert [r["status"] for r in logged[-3:]] == [201, 200, 401]
    assert "Porto" not in stderr


def test_the_client_says_when_no_server_answers() -> None:
    from anamnesis.errors import BackendUnavailableError

    with RemoteMemory(f"http://127.0.0.1:{free_port()}") as nowhere:
        with pytest.raises(BackendUnavailableError, match="cannot reach"):
            nowhere.search("anything")
        with pytest.raises(InvalidInputError, match="episode id"):
            nowhere.get("")


def test_the_load_benchmark_runs_on_a_slice(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from anamnesis.bench.cli import bench

    one = Path(__file__).parent.parent / "fixtures" / "locomo_conv26_sessions1-4.json"
    slice_file = tmp_path / "locomo.json"
    slice_file.write_text(f"[{one.read_text()}]")
    result = CliRunner().invoke(
        bench,
        ["rest", "--data", str(slice_file), "--store", str(tmp_path / "m.db")]
        + ["--episodes", "120", "--queries", "4", "--adds", "4", "--clients", "1,2"]
        + ["--embedder", "edge"],
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| REST")]
    assert len(rows) == 4 and all(row.endswith("| 0 |") for row in rows)
    assert "REST search cost at p50, 1 client" in result.output


def test_the_library_and_the_cli_import_without_the_server_extras() -> None:
    probe = (
        "import sys, anamnesis, anamnesis.server, anamnesis.cli; "
        "print(sorted(m for m in ('fastapi', 'uvicorn', 'httpx', 'pydantic', 'mcp') "
        "if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert loaded.stdout.strip() == "[]", loaded.stderr


def test_every_error_travels_as_its_own_class_and_status() -> None:
    from anamnesis import errors
    from anamnesis.server.wire import error_body, raise_error, status_of

    kinds = [
        kind
        for kind in vars(errors).values()
        if isinstance(kind, type) and issubclass(kind, errors.AnamnesisError)
    ]
    expected = {
        errors.AuthenticationError: 401,
        errors.PermissionDeniedError: 403,
        errors.NotFoundError: 404,
        errors.PayloadTooLargeError: 413,
        errors.InvalidInputError: 400,
        errors.ScopeError: 400,
        errors.EmbedderMismatchError: 409,
        errors.StoreLockedError: 423,
        errors.CorruptStoreError: 503,
        errors.BackendUnavailableError: 503,
    }
    for kind, status in expected.items():
        assert status_of(kind("x")) == status, kind
    for kind in kinds:
        assert status_of(kind("x")) != 500 or kind is errors.AnamnesisError, kind
        with pytest.raises(kind) as raised:
            raise_error(status_of(kind("x")), error_body(kind.__name__, "what happened"))
        assert type(raised.value) is kind and str(raised.value) == "what happened"
