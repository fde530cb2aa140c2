"""Anamnesis: long-term memory for LLM agents, verbatim, offline, in one file."""

# isort: off
from . import offline  # noqa: F401  (first: switches telemetry off before onnxruntime loads)

# isort: on
from .config import SearchConfig
from .consolidate.types import Profile, ProfileEntry, SessionSummary, SummaryLine
from .decay import DecayPolicy
from .errors import (
    AnamnesisError,
    BackendUnavailableError,
    CorruptStoreError,
    EmbedderMismatchError,
    EmbedderUnavailableError,
    InvalidInputError,
    NotFoundError,
    ReadOnlyStoreError,
    SchemaVersionError,
    ScopeError,
    StoreError,
    StoreFullError,
    StoreLockedError,
)
from .facts.types import ConsolidationReport
from .ingest.gate import GateConfig
from .memory import Memory
from .memory.async_memory import AsyncMemory
from .retrieve.analysis import QueryAnalysis
from .store.base import Filters
from .types import (
    ChannelScore,
    DeleteCounts,
    Episode,
    EpisodeVersion,
    Fact,
    ForgetReport,
    GateDecision,
    Hit,
    Page,
    Scope,
    Session,
    Usage,
)
from .version import __version__ as __version__


def __getattr__(name: str) -> type:
    """``RemoteMemory`` and ``AsyncRemoteMemory``, imported when first asked for (they
    need the client extras: ``pip install 'anamnesis[client]'``)."""
    if name == "RemoteMemory":
        from .server.client import RemoteMemory

        return RemoteMemory
    if name == "AsyncRemoteMemory":
        from .server.async_client import AsyncRemoteMemory

        return AsyncRemoteMemory
    raise AttributeError(f"module 'anamnesis' has no attribute {name!r}")


__all__ = [
    "Memory",
    "AsyncMemory",
    "SearchConfig",
    "DecayPolicy",
    "GateConfig",
    "GateDecision",
    "Filters",
    "Episode",
    "EpisodeVersion",
    "Fact",
    "ConsolidationReport",
    "SessionSummary",
    "SummaryLine",
    "Profile",
    "ProfileEntry",
    "Hit",
    "ChannelScore",
    "QueryAnalysis",
    "Page",
    "Scope",
    "Session",
    "DeleteCounts",
    "Usage",
    "ForgetReport",
    "AnamnesisError",
    "InvalidInputError",
    "ScopeError",
    "NotFoundError",
    "StoreError",
    "CorruptStoreError",
    "StoreLockedError",
    "StoreFullError",
    "ReadOnlyStoreError",
    "SchemaVersionError",
    "EmbedderMismatchError",
    "EmbedderUnavailableError",
    "BackendUnavailableError",
]
