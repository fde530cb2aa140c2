"""AsyncRemoteMemory: ``AsyncMemory``'s coroutines against an ``anamnesis serve``
server, over HTTP (httpx's async client).

The same verbs, arguments, results and errors as ``RemoteMemory`` (and so as
``Memory``), each a coroutine::

    async with AsyncRemoteMemory("http://127.0.0.1:8000", api_key="anm_...") as memory:
        hits = await memory.search("where does Ana live?")

``capabilities`` is read from the server when the ``async with`` block opens.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import IO, Any

import httpx

from ..errors import InvalidInputError
from ..facts.worker import ConsolidationWorker
from ..ingest.normalise import check_text, parse_time
from ..memory import ProgressCallback
from ..retrieve.analysis import QueryAnalysis, analyse
from .client import DEFAULT_TIMEOUT, _json, _json_or_text, headers_for, unreachable
from .remote_verbs import AsyncRemoteDerivedView, AsyncRemoteVerbs
from .wire import decode, export_count, import_body, raise_error, request_for


async def _check(response: httpx.Response) -> None:
    """Raise the error an error response carries."""
    if response.is_error:
        await response.aread()
        raise_error(response.status_code, _json_or_text(response))


class AsyncRemoteMemory(AsyncRemoteVerbs):
    """Long-term memory served by ``anamnesis serve``, for asyncio programs.

    ``url`` is the server's address; ``api_key`` its key (default:
    ``$ANAMNESIS_API_KEY``). Use ``async with``, or ``await close()``.
    """

    def __init__(
        self, url: str, *, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers_for(api_key), timeout=timeout
        )
        self._capabilities: dict[str, Any] | None = None

    async def __aenter__(self) -> AsyncRemoteMemory:
        self._capabilities = await self._call("capabilities", {})
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections; the server and its store stay up."""
        await self._http.aclose()

    @property
    def capabilities(self) -> dict[str, Any]:
        """The server's ``Memory.capabilities``, as read when ``async with`` opened."""
        if self._capabilities is None:
            raise InvalidInputError("open the client with `async with` to read capabilities")
        return self._capabilities

    @property
    def derived(self) -> AsyncRemoteDerivedView:
        """The server's ``Memory.derived``: ``await remote.derived.summaries(...)``,
        ``.profiles()``, ``.profile("user")``."""
        return AsyncRemoteDerivedView(self._call)

    async def _send(self, method: str, path: str, **request: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **request)
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from exc
        await _check(response)
        return response

    async def _call(self, verb: str, arguments: dict[str, Any]) -> Any:
        request = request_for(verb, arguments)
        response = await self._send(
            request.method, request.path, params=request.params, json=request.json
        )
        return decode(verb, _json(response))

    async def analyse(
        self, query: str, *, now: datetime | str | float | None = None
    ) -> QueryAnalysis:
        """``Memory.analyse``, computed here: reading a question needs no store."""
        return analyse(check_text(query, "query"), parse_time(now, "now"))

    async def start_consolidation(
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

    async def export_jsonl(self, out: IO[str], *, user_id: str | None = None) -> int:
        """``Memory.export_jsonl``: the server's export, streamed into ``out``."""
        request = request_for("export_jsonl", {"user_id": user_id})
        count = 0
        try:
            async with self._http.stream("GET", request.path, params=request.params) as response:
                await _check(response)
                async for line in response.aiter_lines():
                    if line:
                        count += export_count(line)
                        out.write(line + "\n")
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from exc
        return count

    async def import_jsonl(
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
        response = await self._send(
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
