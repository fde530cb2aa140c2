"""Anamnesis: long-term memory for LLM agents, verbatim, offline, in one file."""

# isort: off
from . import offline  # noqa: F401  (first: switches telemetry off before onnxruntime loads)

# isort: on
from .async_memory import AsyncMemory
from .config import SearchConfig
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
from .memory import Memory
from .retrieve.analysis import QueryAnalysis
from .store.base import Filters
from .types import (
    ChannelScore,
    DeleteCounts,
    Episode,
    EpisodeVersion,
    Fact,
    ForgetReport,
    Hit,
    Page,
    Scope,
    Session,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "Memory",
    "AsyncMemory",
    "SearchConfig",
    "DecayPolicy",
    "Filters",
    "Episode",
    "EpisodeVersion",
    "Fact",
    "ConsolidationReport",
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
