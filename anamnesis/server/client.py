"""RemoteMemory: ``Memory``'s verbs against an ``anamnesis serve`` server, over HTTP.

Code moves from in-process to client/server by changing one line::

    memory = Memory(path="agent.db")
    memory = RemoteMemory("http://127.0.0.1:8000", api_key="anm_...")

Every verb takes the same arguments and returns the same types; errors are the same
``AnamnesisError`` classes with the server's message (``PermissionDeniedError`` and
``AuthenticationError`` come from the keys). What needs the store's own process is
not offered: ``store``, ``embedder`` and ``start_consolidation``. Needs ``httpx`` and
``pydantic`` (``pip install 'anamnesis[client]'``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime
from typing import IO, Any

import httpx

from ..errors import BackendUnavailableError, InvalidInputError
from ..facts.worker import ConsolidationWorker
from ..ingest.normalise import check_text, parse_time
from ..memory import ProgressCallback
from ..retrieve.analysis import QueryAnalysis, analyse
from ..version import __version__
from .remote_verbs import RemoteDerivedView, RemoteVerbs
from .wire import decode, export_count, import_body, raise_error, request_for

#: Environment variable read for the API key when none is passed.
API_KEY_ENV = "ANAMNESIS_API_KEY"
#: Seconds a request may take (a first search loads the server's models).
DEFAULT_TIMEOUT = 60.0


def headers_for(api_key: str | None) -> dict[str, str]:
    """The headers every request carries: the key (argument, else $ANAMNESIS_API_KEY)."""
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
    headers = {"User-Agent": f"anamnesis/{__version__}"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def unreachable(url: str, exc: Exception) -> BackendUnavailableError:
    """The error for a server that cannot be reached."""
    return BackendUnavailableError(f"cannot reach the Anamnesis server at {url}: {exc}")


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise BackendUnavailableError(
            f"the server answered {response.status_code} with something that is not JSON"
        ) from exc


def _check(response: httpx.Response) -> None:
    """Raise the error an error response carries."""
    if response.is_error:
        response.read()
        raise_error(response.status_code, _json_or_text(response))


def _json_or_text(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


class RemoteMemory(RemoteVerbs):
    """Long-term memory served by ``anamnesis serve``: ``Memory``'s verbs over HTTP.

    ``url`` is the server's address; ``api_key`` its key (default:
    ``$ANAMNESIS_API_KEY``). Use it as a context manager, or ``close()`` it.
    """

    def __init__(
        self, url: str, *, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=headers_for(api_key), timeout=timeout)

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections; the server and its store stay up."""
        self._http.close()

    @property
    def capabilities(self) -> dict[str, Any]:
        """The server's ``Memory.capabilities``."""
        return self._call("capabilities", {})

    @property
    def derived(self) -> RemoteDerivedView:
        """The server's ``Memory.derived``: ``remote.derived.summaries(...)``,
        ``.profiles()``, ``.profile("user")``."""
        return RemoteDerivedView(self._call)

    def _send(self, method: str, path: str, **request: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **request)
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from exc
        _check(response)
        return response

    def _call(self, verb: str, arguments: dict[str, Any]) -> Any:
        request = request_for(verb, arguments)
        response = self._send(
            request.method, request.path, params=request.params, json=request.json
        )
        return decode(verb, _json(response))

    def analyse(self, query: str, *, now: datetime | str | float | None = None) -> QueryAnalysis:
        """``Memory.analyse``, computed here: reading a question needs no store."""
        return analyse(check_text(query, "query"), parse_time(now, "now"))

    def start_consolidation(
        self,
        *,
        interval: float = 60.0,
        extractor: str | None = None,
        summaries: str | None = None,
    ) -> ConsolidationWorker:
        """Not over HTTP: background consolidation runs in the process that holds the
        store. Call ``consolidate`` (it runs on the server), or start the worker there."""
        raise InvalidInputError(
            "start_consolidation runs where the store is, not over HTTP: call "
            "consolidate(), or start the worker in the server's process"
        )

    def export_jsonl(self, out: IO[str], *, user_id: str | None = None) -> int:
        """``Memory.export_jsonl``: the server's export, streamed into ``out``."""
        request = request_for("export_jsonl", {"user_id": user_id})
        count = 0
        with self._http.stream("GET", request.path, params=request.params) as response:
            _check(response)
            for line in response.iter_lines():
                if line:
                    count += export_count(line)
                    out.write(line + "\n")
        return count

    def import_jsonl(
        self,
        lines: Iterable[str],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> int:
        """``Memory.import_jsonl`` on the server: the lines go as one request (at most
        the server's body limit); ``progress`` is called once, when it is done."""
        request = request_for("import_jsonl", {"user_id": user_id, "agent_id": agent_id})
        response = self._send(
            request.method,
            request.path,
            params=request.params,
            content=import_body(lines),
            headers={"Content-Type": "application/x-ndjson"},
        )
        imported: int = decode("import_jsonl", _json(response))
        if progress is not None:
            progress(imported)
        return imported
