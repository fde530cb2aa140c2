"""What every part of the ``Memory`` facade shares: its state, declared once, and
the scope check every verb starts with.

``Memory.__init__`` sets these attributes; the verb groups (``writes``, ``reads``,
``facts``, ``lifecycle``, ``gate``, ``maintenance``) inherit them from here instead of
declaring them again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config import SearchConfig
from ..embed import Embedder
from ..errors import NotFoundError
from ..ingest.gate import GateConfig
from ..ingest.normalise import check_episode_id, check_id
from ..llm import ChatClient
from ..retrieve.pipeline import Retriever
from ..store.base import Store
from ..tokens import TokenCounter
from ..types import Episode, Scope
from ..usage import UsageLog

if TYPE_CHECKING:
    from ..consolidate.abstractive import Summarizer
    from ..facts.worker import ConsolidationWorker
    from ..indexer import VectorIndexer

#: Called with the number of items done so far.
ProgressCallback = Callable[[int], None]


class MemoryState:
    """The attributes a ``Memory`` holds, ``_scope``, and the scoped fetch of one episode."""

    default_user: str
    config: SearchConfig
    llm: ChatClient | None
    _store: Store
    _embedder: Embedder
    _retriever: Retriever
    _tokens: TokenCounter | None
    _usage: UsageLog
    _gate: GateConfig | None
    _worker: ConsolidationWorker | None = None
    _summarizer: Summarizer | None = None
    #: ``sync`` or ``background`` (``config.INDEXING_MODES``).
    _indexing: str = "sync"
    #: The thread writing the vectors of episodes stored without one, when running.
    _indexer: VectorIndexer | None = None

    def _scope(self, user_id: str | None, agent_id: str | None, session_id: str | None) -> Scope:
        """The scope a verb acts in: the ids checked, the user defaulted."""
        return Scope(
            user_id=check_id(user_id, "user_id") or self.default_user,
            agent_id=check_id(agent_id, "agent_id"),
            session_id=check_id(session_id, "session_id"),
        )

    def _fetch(self, episode_id: str, scope: Scope) -> Episode:
        """One episode by id, without counting a read."""
        found = self._store.get_episodes([check_episode_id(episode_id)], scope)
        if not found:
            raise NotFoundError(f"no episode {episode_id!r} in this scope")
        return found[0]
