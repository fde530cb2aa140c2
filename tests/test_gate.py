"""The encoding gate: filler stays out of the hot indexes, what matters goes in, nothing
is lost (rejected episodes are archived verbatim and searchable), every decision is
recorded with its signals, and erasure takes the records too.

Real stores, the real MiniLM embedder, a real conversation (the LoCoMo slice and the
bundled demo conversation).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from locomo_slice import load_slice
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (a fixture by name)

from anamnesis import GateConfig, InvalidInputError, Memory, NotFoundError
from anamnesis.ingest.gate import GATE_PRESETS, gate_config, novelty
from anamnesis.ingest.salience import category_of, salience
from anamnesis.store.sqlite.driver import sqlite3

DEMO = Path(__file__).parent.parent / "anamnesis" / "data" / "demo_conversation.json"

FILLER = ["ok thanks!", "lol", "Haha yeah", "Thanks so much, see you later!", "👍"]
WORTH_KEEPING = [
    "I will send you the signed contract by Friday.",
    "Actually, the dentist appointment is on Tuesday the 14th, not Monday.",
    "We decided to go with the blue sofa, it was 1,200 euros.",
]


def _demo_messages() -> list[dict[str, Any]]:
    """The bundled demo conversation, each turn a second after the one before."""
    data = json.loads(DEMO.read_text())
    out = []
    for session in data["sessions"]:
        start = datetime.fromisoformat(session["started_at"])
        for n, message in enumerate(session["messages"]):
            when = start + timedelta(seconds=n)
            out.append({**message, "session_id": session["session_id"], "event_time": when})
    return out


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where a store lives: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "postgres":
        return {"url": request.getfixturevalue("postgres_schema_url")}
    return {"path": tmp_path / "memory.db"}


@pytest.fixture
def gated(where: dict[str, Any], embedder: Any) -> Iterator[Memory]:
    """A memory with the default gate (True Memory's settings), holding the demo chat."""
    with Memory(**where, embedder=embedder, gate="default", warm=False) as memory:
        memory.add_many(_demo_messages(), user_id="maya")
        yield memory


def _add(memory: Memory, texts: list[str]) -> list[str]:
    return [e.id for e in memory.add(texts, user_id="maya", session_id="later")]


def test_filler_is_rejected_and_what_matters_is_admitted(gated: Memory) -> None:
    filler = _add(gated, FILLER)
    kept = _add(gated, WORTH_KEEPING)
    decisions = gated.gate_decisions(filler + kept, user_id="maya")
    assert [decisions[i].admitted for i in filler] == [False] * len(FILLER)
    assert {decisions[i].reason for i in filler} == {"salience below floor"}
    assert [decisions[i].admitted for i in kept] == [True] * len(WORTH_KEEPING)
    assert [decisions[i].category for i in kept] == ["commitment", "correction", "decision"]
    hot = {e.id for e in gated.get_all(user_id="maya", limit=1000).items}
    assert hot.isdisjoint(filler) and hot.issuperset(kept)


def test_a_rejected_episode_is_kept_verbatim_and_found_through_the_archive(gated: Memory) -> None:
    (rejected,) = _add(gated, ["lol ok thanks"])
    assert not gated.gate_decisions(rejected, user_id="maya")[rejected].admitted
    plain = gated.search("lol ok thanks", user_id="maya", limit=20)
    assert rejected not in {h.episode.id for h in plain}
    with pytest.raises(NotFoundError):
        gated.get(rejected, user_id="maya")
    found = gated.search("lol ok thanks", user_id="maya", limit=20, include_archive=True)
    hit = next(h for h in found if h.episode.id == rejected)
    assert hit.episode.content == "lol ok thanks"
    assert "archive" in hit.channels
    # restore brings it into the hot indexes; the decision stays on record.
    assert gated.restore(rejected, user_id="maya") == [rejected]
    assert gated.get(rejected, user_id="maya").content == "lol ok thanks"
    assert rejected in gated.gate_decisions(rejected, user_id="maya")


def test_every_decision_carries_its_signals(gated: Memory) -> None:
    ids = [e.id for e in gated.get_all(user_id="maya", limit=1000).items]  # in event order
    decisions = gated.gate_decisions(ids, user_id="maya")
    assert set(decisions) == set(ids)
    config = GATE_PRESETS["truememory"]
    assert config is not None
    weights = (config.novelty_weight, config.salience_weight, config.prediction_error_weight)
    for d in decisions.values():
        signals = (d.novelty, d.salience, d.prediction_error)
        assert all(0.0 <= s <= 1.0 for s in signals)
        mean = sum(w * s for w, s in zip(weights, signals, strict=True)) / sum(weights)
        assert math.isclose(d.score, mean, rel_tol=1e-9)
        offset = config.category_offsets.get(d.category, 0.0)
        assert math.isclose(d.threshold, config.threshold + offset)
        assert d.admitted == (d.salience >= config.salience_floor and d.score >= d.threshold)
        assert d.gate == "truememory"
    # The first episode meets an empty memory: everything about it is new.
    first = decisions[ids[0]]
    assert first.novelty == 1.0 and first.prediction_error == 1.0
    assert gated.capabilities["encoding_gate"] == "truememory"


def test_a_restatement_is_less_novel_than_news(gated: Memory) -> None:
    again, news = _add(
        gated,
        [
            "Morning! I finally signed the lease on the flat in Porto, I move in on the 20th.",
            "My brother Tiago got a job at the aquarium in Lisbon, he starts in March.",
        ],
    )
    decisions = gated.gate_decisions([again, news], user_id="maya")
    assert decisions[again].novelty < 0.3 < decisions[news].novelty
    assert decisions[again].prediction_error < 0.2 < decisions[news].prediction_error
    # Said again word for word, the news of the first session is turned away.
    assert not decisions[again].admitted and decisions[news].admitted


def test_the_gate_keeps_the_evidence_of_a_real_conversation(tmp_path: Path, embedder: Any) -> None:
    """On the LoCoMo slice, the default gate turns away a few pleasantries and no turn
    any question needs; a stricter gate turns away more, evidence included."""
    counts = {}
    for name in ("default", "strict"):
        with Memory(path=tmp_path / f"{name}.db", embedder=embedder, gate=name) as memory:
            qa = load_slice(memory, "u")
            hot = memory.get_all(user_id="u", limit=1000).items
            counts[name] = len(hot)
            evidence = {e for q in qa for e in q.get("evidence", [])}
            lost = evidence - {e.metadata["dia_id"] for e in hot}
            if name == "default":
                assert not lost
    assert 70 <= counts["default"] < 76
    assert counts["strict"] < counts["default"]


def test_turn_positions_continue_past_archived_turns(gated: Memory) -> None:
    (filler,) = _add(gated, ["ok thanks!"])
    (after,) = gated.add("I booked the flight to Lisbon.", user_id="maya", session_id="later")
    (archived,) = [
        h.episode
        for h in gated.search("ok thanks", user_id="maya", include_archive=True, limit=50)
        if h.episode.id == filler
    ]
    assert archived.turn_index is not None and after.turn_index == archived.turn_index + 1


def test_gate_off_is_the_store_without_a_gate(tmp_path: Path, embedder: Any) -> None:
    messages = [*_demo_messages(), *({"content": t, "session_id": "x"} for t in FILLER)]
    results = []
    for name, gate in (("none", None), ("off", "off")):
        with Memory(path=tmp_path / f"{name}.db", embedder=embedder, gate=gate) as memory:
            episodes = memory.add_many(messages, user_id="maya")
            assert memory.get_all(user_id="maya", limit=1000).total == len(messages)
            assert memory.gate_decisions([e.id for e in episodes], user_id="maya") == {}
            assert memory.capabilities["encoding_gate"] == "off"
            hits = memory.search("ok thanks, where does Maya live?", user_id="maya", limit=10)
            results.append([(h.episode.content, round(h.score, 9)) for h in hits])
            with sqlite3.connect(tmp_path / f"{name}.db") as conn:
                assert conn.execute("SELECT COUNT(*) FROM gate_decisions").fetchone() == (0,)
                assert conn.execute("SELECT COUNT(*) FROM archived_episodes").fetchone() == (0,)
    assert results[0] == results[1]


def test_forget_and_delete_remove_the_decisions(gated: Memory) -> None:
    filler = _add(gated, FILLER[:2])
    kept = _add(gated, WORTH_KEEPING[:1])
    counts = gated.delete(filler[0], user_id="maya")
    assert (counts.archived, counts.gate_decisions, counts.episodes) == (1, 1, 0)
    report = gated.forget(user_id="maya")
    assert report.counts.gate_decisions == len(_demo_messages()) + 2
    assert report.counts.archived == 1
    assert gated.gate_decisions(filler + kept, user_id="maya") == {}
    assert gated.search("lol", user_id="maya", include_archive=True) == []


def test_decisions_stay_in_their_scope(gated: Memory) -> None:
    (mine,) = _add(gated, ["lol"])
    assert gated.gate_decisions(mine, user_id="someone-else") == {}
    assert mine in gated.gate_decisions([mine], user_id="maya")


@pytest.mark.parametrize(
    "gate",
    [
        "nope",
        42,
        {"threshold": 0.3},
    ],
)
def test_an_unknown_gate_is_refused(tmp_path: Path, embedder: Any, gate: Any) -> None:
    with pytest.raises(InvalidInputError):
        Memory(path=tmp_path / "m.db", embedder=embedder, gate=gate)


@pytest.mark.parametrize(
    "changes",
    [
        {"threshold": float("nan")},
        {"threshold": "high"},
        {"novelty_weight": -1.0},
        {"novelty_weight": 0.0, "salience_weight": 0.0, "prediction_error_weight": 0.0},
        {"salience_floor": 1.5},
        {"category_offsets": {"gossip": -0.1}},
        {"category_offsets": {"decision": float("inf")}},
        {"neighbours": 0},
        {"neighbours": True},
    ],
)
def test_bad_gate_settings_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        GateConfig(**changes)


def test_presets_by_name() -> None:
    assert gate_config(None) is None and gate_config("off") is None
    assert gate_config("default") == gate_config("truememory")
    custom = GateConfig(threshold=0.5)
    assert gate_config(custom) is custom and custom.name == "custom"
    lenient, default, strict = (gate_config(n) for n in ("lenient", "truememory", "strict"))
    assert lenient is not None and default is not None and strict is not None
    assert lenient.threshold < default.threshold < strict.threshold
    # True Memory's production defaults ("Storage Is Not Memory", §4 Stage 1).
    assert (default.novelty_weight, default.salience_weight) == (0.25, 0.20)
    assert (default.prediction_error_weight, default.threshold) == (0.30, 0.30)
    assert default.salience_floor == 0.10


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("ok thanks!", "filler"),
        ("Hahaha yeah, me too", "filler"),
        ("I'll call the landlord tomorrow morning.", "commitment"),
        ("Actually it was my cousin, not my brother.", "correction"),
        ("We decided to adopt a second cat.", "decision"),
        ("I prefer tea to coffee in the evenings.", "preference"),
        ("My sister lives in Berlin now.", "relationship"),
        ("What time does the show start?", "question"),
        ("The museum reopened after the renovation.", "statement"),
    ],
)
def test_salience_categories(text: str, category: str) -> None:
    assert category_of(text) == category


def test_salience_rewards_particulars() -> None:
    plain = salience("The museum reopened after the renovation.").score
    detailed = salience("The Prado museum reopened on 3 May 2023 after 14 months.").score
    assert salience("lol").score < 0.1 < plain < detailed <= 1.0


def test_novelty_against_memory() -> None:
    memory = ["I adopted a beagle called Max from the shelter last spring."]
    assert novelty("I adopted a beagle called Max from the shelter.", []) == 1.0
    repeated = novelty("I adopted a beagle called Max from the shelter last spring.", memory)
    fresh = novelty("The quarterly tax return is due at the end of January.", memory)
    assert repeated < 0.3 < fresh <= 1.0
    assert novelty("k", memory) == 0.05


def test_cli_adds_through_the_gate_and_explains_it(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from anamnesis.cli import main

    base = ["--path", str(tmp_path / "m.db"), "--embedder", "edge", "--gate", "default"]
    runner = CliRunner()
    added = runner.invoke(main, [*base, "add", "--user", "maya", "ok thanks!"])
    assert added.exit_code == 0, added.output
    episode_id = added.output.strip()
    shown = runner.invoke(main, [*base, "gate-decisions", "--user", "maya", episode_id])
    assert shown.exit_code == 0, shown.output
    decision = json.loads(shown.output)[episode_id]
    assert decision["admitted"] is False and decision["category"] == "filler"
    assert set(decision) >= {"novelty", "salience", "prediction_error", "score", "threshold"}
    refused = runner.invoke(main, [*base[:4], "--gate", "nope", "stats"])
    assert refused.exit_code == 2


def test_the_gates_neighbour_lookup_is_dense_search_for_many(gated: Memory) -> None:
    from anamnesis.store.base import Filters
    from anamnesis.types import Scope

    texts = ["Where does Maya live?", "training for a half marathon", "cats and allergies"]
    vectors = gated.embedder.embed_documents(texts)
    scope = Scope("maya")
    many = gated.store.dense_neighbours(vectors, scope, 5)
    one_by_one = [gated.store.dense_search(v, scope, Filters(), 5) for v in vectors]
    assert [[c.episode_id for c in found] for found in many] == [
        [c.episode_id for c in found] for found in one_by_one
    ]
    for found, expected in zip(many, one_by_one, strict=True):
        for a, b in zip(found, expected, strict=True):
            assert math.isclose(a.score, b.score, abs_tol=1e-5)
    assert gated.store.dense_neighbours(vectors, Scope("nobody"), 5) == [[], [], []]
