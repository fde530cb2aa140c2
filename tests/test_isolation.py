"""Isolation under attack: questions aimed at another user's memories, through every
preset's every channel, the context and the fact layer, never return a byte of them.

Two users share vocabulary, speaker names, session ids and dates; each question asks
about the *other* user's secrets (their words, their names, their dates). Every hit,
every neighbouring turn, every supporting fact and every packed context is checked.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.embed import get_embedder

EDGE = get_embedder("edge")
PRESETS_TRIED = ("default", "full-priors", "hybrid", "temporal", "facts")


def _conversation(owner: str, secret: str, city: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "speaker": "Sam", "content": f"My locker code is {secret}"},
        {"role": "assistant", "speaker": "Helper", "content": "I will remember the code."},
        {"role": "user", "speaker": "Sam", "content": f"I moved to {city} last May"},
        {"role": "user", "speaker": "Sam", "content": f"I work at {owner.title()}Corp now"},
        {"role": "assistant", "speaker": "Helper", "content": f"What do you like about {city}?"},
        {"role": "user", "speaker": "Sam", "content": "The river walks, every evening."},
    ]


USERS = {"ana": ("ZX-4471", "Lisbon"), "bob": ("QK-9902", "Oslo")}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("isolation") / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        for owner, (secret, city) in USERS.items():
            memory.add(
                _conversation(owner, secret, city),
                user_id=owner,
                session_id="shared-session-id",
                event_time="2024-06-01T10:00:00Z",
            )
            memory.consolidate(user_id=owner)
    yield path


def _questions(secret: str, city: str, owner: str) -> list[str]:
    return [
        f"what is the locker code {secret}?",
        f"when did Sam move to {city}?",
        f"where does Sam work, {owner.title()}Corp?",
        "what did Helper say about the code?",
        "what happened on 1 June 2024?",
        f"{secret} {city} {owner}",
    ]


@pytest.mark.parametrize("preset", PRESETS_TRIED)
def test_no_question_reaches_another_users_memories(store: Path, preset: str) -> None:
    attempts = 0
    with Memory(path=store, embedder=EDGE, warm=False, config=BENCH_PRESETS[preset]) as memory:
        for asker, other in itertools.permutations(USERS, 2):
            secret, city = USERS[other]
            for question in _questions(secret, city, other):
                hits = memory.search(question, user_id=asker, limit=20, explain=True)
                for hit in hits:
                    assert hit.episode.user_id == asker
                    assert all(turn.user_id == asker for turn in hit.context)
                    assert all(fact.user_id == asker for fact in hit.facts)
                    assert secret not in hit.episode.content
                text = memory.context(question, user_id=asker).text
                assert secret not in text and city not in text
                attempts += 1
    assert attempts == 12
