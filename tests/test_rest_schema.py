"""The REST API against its own OpenAPI document: schemathesis generates requests for
every operation (valid ones and edge cases of each parameter's type) and sends them
to a real server on 127.0.0.1, each with a user key and with an admin key; none may end
in a server error (5xx).

Bounded for CI: ``ANAMNESIS_HYPOTHESIS_EXAMPLES`` examples per operation (default
25; the figure in the closing note of issue 20 used 300).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from rest_fixtures import RestServer

from anamnesis import Memory
from anamnesis.server import ServerLimits
from anamnesis.server.keys import KeyStore

schemathesis = pytest.importorskip("schemathesis")
from schemathesis.checks import not_a_server_error  # noqa: E402

EXAMPLES = int(os.environ.get("ANAMNESIS_HYPOTHESIS_EXAMPLES", "25"))


@schemathesis.serializer("application/x-ndjson")
def _ndjson(context: object, value: object) -> bytes:
    """An import body as generated: any text, sent as UTF-8 (lone surrogates too)."""
    return str(value).encode("utf-8", "surrogatepass")


class Served:
    def __init__(self, root: Path) -> None:
        from rest_fixtures import EDGE

        store = root / "m.db"
        with Memory(path=store, embedder=EDGE, warm=False) as memory:
            memory.add(
                ["I live in Porto", "I work at Acme", "My sister is allergic to cats"],
                user_id="maya",
                session_id="s1",
            )
            memory.add("Bob's locker code is 9902", user_id="bob")
            memory.consolidate(user_id="maya")
        keys = KeyStore(root / "keys.db")
        self.keys = {
            "user": keys.create("schemathesis", user_id="maya")[1],
            "admin": keys.create("schemathesis admin", user_id=None)[1],
        }
        keys.close()
        self.server = RestServer(
            {"path": store}, root / "keys.db", ServerLimits(max_body_bytes=64_000)
        )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    running = Served(tmp_path_factory.mktemp("schema"))
    yield running
    running.server.stop()


@pytest.fixture(scope="module")
def api_schema(served: Served) -> object:
    return schemathesis.openapi.from_url(f"{served.server.url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_request_ends_in_a_server_error(case: object, served: Served) -> None:
    for key in served.keys.values():
        response = case.call(headers={"Authorization": f"Bearer {key}"})  # type: ignore[attr-defined]
        case.validate_response(response, checks=[not_a_server_error])  # type: ignore[attr-defined]
