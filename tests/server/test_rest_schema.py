"""The REST API against its own OpenAPI document: schemathesis generates requests for
every operation (valid ones, and invalid ones of each parameter's type) and sends them
to a real server on 127.0.0.1, on each backend, each with a user key and with an admin
key. None may end in a server error (5xx), and every error body names a documented
error type. Every integer the requests carry is kept, or swapped for one drawn up to
2**70 in size, whatever bounds the document gives.

Bounded for CI: ``ANAMNESIS_HYPOTHESIS_EXAMPLES`` examples per operation (default
25; RELIABILITY.md gives the slow run of 300 and its figures).
``ANAMNESIS_SCHEMA_OPERATIONS``, a regular expression over operation names such as
``GET /v1/episodes``, narrows a slow run to the operations it matches.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from rest_fixtures import RestServer, documented_errors
from store_fixtures import postgres_url_or_skip, with_search_path

from anamnesis import Memory
from anamnesis.server import ServerLimits
from anamnesis.server.keys import KeyStore

schemathesis = pytest.importorskip("schemathesis")
from schemathesis.checks import not_a_server_error  # noqa: E402

EXAMPLES = int(os.environ.get("ANAMNESIS_HYPOTHESIS_EXAMPLES", "25"))
#: Integers outside every bound a request has: past 53 and 64 bits, and negative.
HUGE = (2**53, 2**63 - 1, 2**63, 2**64, 2**70, -(2**63) - 1, -(2**70))
BIG_INTEGERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from((2**31, *HUGE))
)


@schemathesis.serializer("application/x-ndjson")
def _ndjson(context: object, value: object) -> bytes:
    """An import body as generated: any text, sent as UTF-8 (lone surrogates too)."""
    return str(value).encode("utf-8", "surrogatepass")


def _wider(value: Any) -> st.SearchStrategy[Any]:
    """``value``, with each integer in it kept or replaced by one up to 2**70 in size."""
    if isinstance(value, bool):
        return st.just(value)
    if isinstance(value, int):
        return st.one_of(st.just(value), BIG_INTEGERS)
    if isinstance(value, dict):
        return st.fixed_dictionaries({key: _wider(item) for key, item in value.items()})
    if isinstance(value, list):
        return st.tuples(*(_wider(item) for item in value)).map(list)
    return st.just(value)


class Served:
    def __init__(self, root: Path, where: dict[str, Any]) -> None:
        from rest_fixtures import EDGE

        with Memory(**where, embedder=EDGE, warm=False) as memory:
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
        self.server = RestServer(where, root / "keys.db", ServerLimits(max_body_bytes=64_000))


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("schema")
    if request.param == "sqlite":
        yield from _serving(root, {"path": root / "m.db"})
        return
    import psycopg

    url = postgres_url_or_skip()
    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield from _serving(root, {"url": with_search_path(url, schema)})
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _serving(root: Path, where: dict[str, Any]) -> Iterator[Served]:
    running = Served(root, where)
    try:
        yield running
    finally:
        running.server.stop()


@pytest.fixture(scope="module")
def api_schema(served: Served) -> object:
    loaded = schemathesis.openapi.from_url(f"{served.server.url}/openapi.json")
    for container in ("query", "body"):
        loaded.hooks.hook(f"flatmap_{container}")(lambda context, value: _wider(value))
    return loaded


def documented_error_type(ctx: object, response: Any, case: object) -> None:
    """An error response's body names an error type the guide documents."""
    if response.status_code < 400:
        return
    kind = response.json().get("error", {}).get("type")
    if kind not in documented_errors():
        raise AssertionError(f"{response.status_code} with undocumented error type {kind!r}")


schema = schemathesis.pytest.from_fixture("api_schema")
if os.environ.get("ANAMNESIS_SCHEMA_OPERATIONS"):
    schema = schema.include(name_regex=os.environ["ANAMNESIS_SCHEMA_OPERATIONS"])


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
        case.validate_response(  # type: ignore[attr-defined]
            response, checks=[not_a_server_error, documented_error_type]
        )


# -- every integer is bounded, and a number past its bound is bad input ---------------------
def _document(served: Served) -> dict[str, Any]:
    return httpx.get(f"{served.server.url}/openapi.json", timeout=10).json()  # type: ignore[no-any-return]


def _integers(node: Any, schemas: dict[str, Any], seen: frozenset[str] = frozenset()) -> Any:
    """Every integer schema within ``node``, following references."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[1]
            if name not in seen:
                yield from _integers(schemas[name], schemas, seen | {name})
            return
        if node.get("type") == "integer":
            yield node
        for child in node.values():
            yield from _integers(child, schemas, seen)
    elif isinstance(node, list):
        for child in node:
            yield from _integers(child, schemas, seen)


def _integer_parameters(document: dict[str, Any]) -> Iterator[tuple[str, str, str, str, Any]]:
    """(method, path, "query" or "body", name, integer schema) of every integer a
    request carries, at any depth of its parameters and body."""
    schemas = document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                for integer in _integers(parameter["schema"], schemas):
                    yield method, path, "query", parameter["name"], integer
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is None:
                continue
            model = schemas[body["schema"]["$ref"].rsplit("/", 1)[1]]
            for name, field in model["properties"].items():
                for integer in _integers(field, schemas):
                    yield method, path, "body", name, integer


def test_every_integer_a_request_carries_is_bounded_in_the_document(served: Served) -> None:
    found = list(_integer_parameters(_document(served)))
    assert len(found) >= 8  # limit, offset, budget_tokens, neighbour_hits, ...
    for method, path, _, name, integer in found:
        assert "minimum" in integer and "maximum" in integer, (method, path, name)
        assert integer["maximum"] <= 2**53 - 1, (method, path, name)


def _minimal_body(document: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    """A body holding only the operation's required fields, each with a plain value."""
    operation = document["paths"][path][method]
    name = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    model = document["components"]["schemas"][name.rsplit("/", 1)[1]]
    plain = {"query": "where do I live?", "content": "hello", "messages": ["hello"]}
    return {field: plain.get(field, "ep_x") for field in model.get("required", [])}


def test_a_huge_integer_anywhere_is_bad_input_with_a_documented_type(served: Served) -> None:
    document = _document(served)
    parameters = sorted({found[:4] for found in _integer_parameters(document)})
    assert ("get", "/v1/episodes", "query", "offset") in parameters
    assert ("post", "/v1/context", "body", "budget_tokens") in parameters
    headers = {"Authorization": f"Bearer {served.keys['admin']}"}
    with httpx.Client(base_url=served.server.url, headers=headers, timeout=30) as client:
        for method, path, place, name in parameters:
            for number in HUGE:
                if place == "query":
                    response = client.request(
                        method, path, params={"user_id": "maya", name: number}
                    )
                else:
                    body = {
                        **_minimal_body(document, path, method),
                        "user_id": "maya",
                        name: number,
                    }
                    response = client.request(method, path, json=body)
                said = (method, path, name, number, response.text[:200])
                assert response.status_code == 400, said
                assert response.json()["error"]["type"] in documented_errors(), said
