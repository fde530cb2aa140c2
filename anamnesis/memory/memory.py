"""The Memory facade: opens the store, embedder and pipeline, and gathers the verbs.

Each group of verbs lives in its own module (``writes``, ``reads``, ``facts``,
``lifecycle``, ``gate``, ``maintenance``, the ``derived`` views), all sharing the state
``state.MemoryState`` declares. The other surfaces (``AsyncMemory``, the REST clients)
are generated from these verbs by scripts/generate_verbs.py.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from .. import offline
from ..config import (
    DEFAULT_PRESET,
    DEFAULT_USER,
    PRESETS,
    URL_ENV,
    SearchConfig,
    default_path,
    durability_level,
    indexing_mode,
)
from ..embed import Embedder, get_embedder
from ..errors import AnamnesisError, EmbedderMismatchError, InvalidInputError, NotFoundError
from ..ingest.gate import GateConfig, gate_config
from ..ingest.normalise import (
    check_id,
)
from ..llm import ChatClient
from ..retrieve.pipeline import Retriever
from ..store.base import Store
from ..tokens import TokenCounter
from ..usage import UsageLog
from .derived import DerivedView
from .facts import FactVerbs
from .lifecycle import LifecycleVerbs
from .maintenance import REINDEX_MARK, MaintenanceVerbs
from .reads import ReadVerbs
from .state import ProgressCallback
from .writes import WriteVerbs

__all__ = ["Memory", "ProgressCallback"]

#: Every Memory not yet closed, so that the process can close them before it exits.
_OPEN_MEMORIES: weakref.WeakSet[Memory] = weakref.WeakSet()


@atexit.register
def _close_open_memories() -> None:
    """Close what a program left open, before the interpreter shuts down.

    A background thread still inside native code (onnxruntime loading a model) when
    the interpreter finalises is torn down mid-call, and the C++ runtime aborts the
    process (exit 134) after the program's work is done. Closing joins those threads
    first, so the exit code is the program's own.
    """
    for memory in list(_OPEN_MEMORIES):
        memory.close()


def _open_store(
    path: str | os.PathLike[str] | None, url: str | None, dim: int, create: bool, durability: str
) -> Store:
    url = url or os.environ.get(URL_ENV)
    if url:
        from ..store import open_url

        return open_url(url, dim=dim, durability=durability)
    from ..store.sqlite import SQLiteStore

    file = Path(path) if path is not None else default_path()
    if not create and not file.exists():
        raise NotFoundError(
            f"there is no store at {file}: add something first, or point --path "
            "(ANAMNESIS_PATH) at an existing store"
        )
    return SQLiteStore(file, dim=dim, durability=durability)


class Memory(WriteVerbs, ReadVerbs, FactVerbs, LifecycleVerbs, MaintenanceVerbs):
    """Long-term memory for an agent: verbatim episodes with hybrid recall.

    >>> with Memory(path="agent.db") as memory:                      # doctest: +SKIP
    ...     memory.add("I moved to Lisbon in May", user_id="ana")
    ...     memory.search("where does Ana live?", user_id="ana")

    ``path`` is the SQLite file (default: ``$ANAMNESIS_PATH`` or the OS data dir);
    ``url`` selects a database server instead (``postgresql://...``). ``embedder`` is a
    name (``"minilm"``, ``"edge"``, ``"openai:MODEL"``) or an Embedder. A store remembers
    its embedder: opening it with another raises EmbedderMismatchError unless
    ``reindex=True``, which re-embeds every episode from its stored text.
    ``config`` is the search pipeline: a ``SearchConfig``, e.g. one of ``PRESETS``
    (``"default"``, the best measured on data it was not tuned on; ``"fast"``, plain
    BM25 + dense fusion; ``"ranker"``, the default plus the learned ranker; ``"facts"``).
    ``warm=True`` loads the model and the vector index in a background thread at open,
    so the first search is fast; pass False for short-lived processes that only write.
    ``create=False`` raises NotFoundError instead of creating a missing SQLite store
    (for tools that only read).
    ``llm`` is an optional OpenAI-compatible client for fact extraction, ambiguous
    conflicts and session summaries (``"env"``: from ``ANAMNESIS_LLM_*``); None: no model.
    ``gate`` is the encoding gate: None or ``"off"`` (the default) stores every episode
    in the hot indexes; a preset name (``"lenient"``, ``"truememory"`` = ``"default"``,
    ``"strict"``; ``anamnesis.ingest.gate.GATE_PRESETS``) or a ``GateConfig`` judges
    each added episode, sends the rejected verbatim to the archive, and records every
    decision (``gate_decisions``).
    ``durability`` (default ``$ANAMNESIS_DURABILITY``, else ``"normal"``): ``"normal"``
    survives a process crash; ``"full"`` syncs each commit, so it survives a power loss
    too, at a cost per write (RELIABILITY.md says what each promises and costs).
    ``indexing``: ``"sync"`` (the default) writes each episode's vector in the add's
    transaction; ``"background"`` returns once the text is stored and lets a thread
    write the vectors after (``wait_indexed`` waits for it): until then the newest
    episodes are found only by the channels that match words, and ``explain`` says
    how many.
    Refused with an encoding gate, which judges an episode by its vector
    before storing it. Episodes left waiting (a kill, a close) are indexed at the next
    open, in either mode.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        embedder: str | Embedder | None = None,
        config: SearchConfig | None = None,
        user_id: str = DEFAULT_USER,
        reindex: bool = False,
        warm: bool = True,
        llm: ChatClient | str | None = None,
        create: bool = True,
        gate: str | GateConfig | None = None,
        durability: str | None = None,
        indexing: str | None = None,
    ) -> None:
        self._gate = gate_config(gate)
        durability = durability_level(durability)
        self._indexing = indexing_mode(indexing)
        if self._indexing == "background" and self._gate is not None:
            raise InvalidInputError(
                "the encoding gate judges each episode by its vector before storing it, "
                "so it cannot run with indexing='background': choose one of the two"
            )
        self.default_user = check_id(user_id, "user_id", required=True) or DEFAULT_USER
        offline.warn_if_telemetry_on()
        if isinstance(llm, str):
            if llm != "env":
                raise InvalidInputError("llm must be a ChatClient, 'env' or None")
            llm = ChatClient.from_env()
        self.llm = llm
        self._embedder = get_embedder(embedder)
        self._store = _open_store(path, url, self._embedder.dim, create, durability)
        if self._indexing == "background" and not self._store.background_indexing:
            self._store.close()
            raise InvalidInputError(
                f"indexing='background' is not built for the {self._store.backend} "
                "backend; open it with indexing='sync' (the default)"
            )
        self.config = config or PRESETS[DEFAULT_PRESET]
        try:
            self._retriever = Retriever(self._store, self._embedder, self.config)
        except InvalidInputError:
            self._store.close()  # a bad configuration leaves no store open
            raise
        self._tokens: TokenCounter | None = None
        try:
            self._check_embedder(reindex)
        except AnamnesisError:
            self._store.close()
            raise
        self._usage = UsageLog(self._store)
        self._closed = False
        self._close_lock = threading.Lock()
        self._indexer_lock = threading.Lock()
        if self._indexing == "background" or self._has_backlog():
            self._start_indexer()
        self._warm_thread: threading.Thread | None = None
        _OPEN_MEMORIES.add(self)
        if warm:
            self._warm_thread = threading.Thread(
                target=self._warm_up, name="anamnesis-warm-up", daemon=True
            )
            self._warm_thread.start()

    def _warm_up(self) -> None:
        """Load the embedding model, the dense index and the stages' models in the
        background.

        All are loaded lazily anyway; doing it at open means the first search does
        not pay for it. A failure here is not lost: the same load runs again, and
        raises, in the call that needs it.
        """
        try:
            self._embedder.embed_query("warm-up")
            self._store.warm_up()
            self._retriever.warm_up()
        except AnamnesisError:
            return

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Wait for the warm-up, stop background consolidation and close the store.

        The Memory cannot be used afterwards. Closing twice, or from several threads,
        is harmless; a Memory left open is closed when the process exits.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._warm_thread is not None and self._warm_thread is not threading.current_thread():
            self._warm_thread.join()
        self._stop_consolidation()
        self._stop_indexer()
        self._usage.close()
        self._retriever.resources.close()
        self._store.close()
        _OPEN_MEMORIES.discard(self)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store(self) -> Store:
        """The storage backend (for advanced use and benchmarks)."""
        return self._store

    @property
    def embedder(self) -> Embedder:
        """The embedder in use."""
        return self._embedder

    @property
    def derived(self) -> DerivedView:
        """The session summaries and profiles ``consolidate`` builds:
        ``memory.derived.summaries(user_id=...)``, ``.profiles()``, ``.profile("user")``."""
        return DerivedView(self._store, self._scope)

    @property
    def capabilities(self) -> dict[str, Any]:
        """What is active: backend, embedder, search, LLM, summaries (``"extractive"``,
        ``"abstractive"``, or why they fell back), telemetry (``"off"``, or why not), store
        health (``"ok"``, or the damage: writes refused), usage counters (``"ok"``, or why
        not), the encoding gate (``"off"``, a preset name, or ``"custom"``), the
        durability (``"normal"`` or ``"full"``), how ``forget`` erases (``erasure``:
        in place, or by rewriting the full-text index on an SQLite too old for that),
        when vectors are written (``indexing``), the background indexer's state
        (``indexer``: ``"off"``, ``"running"``, ``"stopped"`` or ``"failed: ..."``) and
        how many episodes wait for their vector (``vector_backlog``)."""
        damage = self._store.damage
        return {
            "backend": self._store.backend,
            "embedder": self._embedder.name,
            "embedding_dim": self._embedder.dim,
            "vector_search": self._store.vector_backend,
            "lexical_search": self._store.lexical_backend,
            "search_channels": list(self.config.channels),
            "search_stages": list(self.config.stages),
            "llm": self.llm.model if self.llm is not None else None,
            "fact_extractor": "llm" if self.llm is not None else "rules",
            "summaries": self._summaries_state(),
            "consolidation": self._worker.state if self._worker is not None else "manual",
            "usage_counters": self._usage.state,
            "telemetry": offline.telemetry(),
            "store_health": "ok" if damage is None else f"damaged: {damage}",
            "encoding_gate": self._gate.name if self._gate is not None else "off",
            "durability": self._store.durability,
            "erasure": self._store.erasure,
            "indexing": self._indexing,
            "indexer": self._indexer.state if self._indexer is not None else "off",
            "vector_backlog": self._vector_backlog(),
        }

    def _check_embedder(self, reindex: bool) -> None:
        stored_name = self._store.get_meta("embedder_name")
        stored_dim = self._store.get_meta("embedder_dim")
        current = (self._embedder.name, str(self._embedder.dim))
        unfinished = self._store.get_meta(REINDEX_MARK)
        if unfinished and (tuple(unfinished.split("\t")) != current or not reindex):
            name, dim = unfinished.split("\t")
            raise EmbedderMismatchError(
                f"re-embedding this store with {name} ({dim}-d) was cut short, so its "
                f"vectors are of two embedders. Open it with {name} and reindex=True "
                f"(CLI: anamnesis reindex --embedder {name}) to finish."
            )
        if stored_name is None:
            self._store.set_meta("embedder_name", current[0])
            self._store.set_meta("embedder_dim", current[1])
            return
        if (stored_name, stored_dim) == current:
            return
        if not reindex:
            raise EmbedderMismatchError(
                f"this store was built with embedder {stored_name} ({stored_dim}-d), not "
                f"{current[0]} ({current[1]}-d). Open it with the same embedder, or pass "
                "reindex=True (CLI: anamnesis reindex --embedder ...) to re-embed everything."
            )
        self.reindex()
