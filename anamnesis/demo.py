"""The demo: ingest a small bundled conversation and answer a few questions."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .embed import Embedder
from .memory import Memory

DEMO_FILE = Path(__file__).resolve().parent / "data" / "demo_conversation.json"
#: The user the demo conversation belongs to.
DEMO_USER = "demo"


def load_demo(memory: Memory) -> list[tuple[str, str]]:
    """Replace the demo user's memory in ``memory`` with the bundled conversation; return
    its questions, each with a phrase of the turn that answers it."""
    demo = json.loads(DEMO_FILE.read_text(encoding="utf-8"))
    user = DEMO_USER
    memory.delete_all(user_id=user)
    for session in demo["sessions"]:
        start = datetime.fromisoformat(session["started_at"].replace("Z", "+00:00"))
        messages = [
            {**message, "event_time": start + timedelta(minutes=i)}
            for i, message in enumerate(session["messages"])
        ]
        memory.add_many(messages, user_id=user, session_id=session["session_id"])
    return list(zip(demo["questions"], demo["answered_by"], strict=True))


def run_demo(path: Path, *, embedder: str | Embedder | None = None, console: Console) -> None:
    """Rebuild the demo store at ``path`` and print the answers to its questions."""
    started = time.perf_counter()
    with Memory(path=path, embedder=embedder) as memory:
        questions = load_demo(memory)
        stats = memory.stats(user_id=DEMO_USER)
        console.print(
            f"Stored {stats['episodes']} turns from {stats['sessions']} sessions in {path} "
            f"({time.perf_counter() - started:.1f}s, embedder {memory.embedder.name})\n"
        )
        for question, _ in questions:
            hits = memory.search(question, user_id=DEMO_USER, limit=2)
            table = Table(title=question, title_justify="left", show_header=False, expand=True)
            table.add_column("when", width=10)
            table.add_column("content", overflow="fold")
            for hit in hits:
                table.add_row(hit.episode.event_time.strftime("%Y-%m-%d"), hit.episode.content)
            console.print(table)
