"""Strength follows its forgetting curve; decay archives the weak and deletes nothing."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from anamnesis import DecayPolicy, InvalidInputError, Memory
from anamnesis.decay import (
    ARCHIVE_BELOW,
    BASE_STABILITY_DAYS,
    STABILITY_GROWTH,
    stability_days,
    strength,
)
from anamnesis.embed import get_embedder

EDGE = get_embedder("edge")


@pytest.fixture
def memory(tmp_path):
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        yield memory


@pytest.mark.parametrize("retrievals", [0, 1, 3])
@pytest.mark.parametrize("salience", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("days", [0.0, 1.0, 30.0, 400.0])
def test_the_curve_is_its_formula(retrievals, salience, days) -> None:
    tau = BASE_STABILITY_DAYS * STABILITY_GROWTH**retrievals * (1 + 4 * salience)
    assert stability_days(retrievals, salience) == pytest.approx(tau)
    assert strength(days, retrievals, salience) == pytest.approx(
        (1 + salience) * math.exp(-days / tau)
    )


def test_the_curve_has_the_shape_it_promises() -> None:
    assert strength(0, 0, 0) == 1.0
    assert strength(BASE_STABILITY_DAYS, 0, 0) == pytest.approx(1 / math.e)
    assert strength(BASE_STABILITY_DAYS * math.log(1 / ARCHIVE_BELOW), 0, 0) == pytest.approx(
        ARCHIVE_BELOW
    )
    assert strength(60, 1, 0) > strength(60, 0, 0)  # retrieval slows forgetting
    assert strength(60, 0, 1) > strength(60, 0, 0)  # so does salience
    assert strength(-5, 0, 0) == 1.0  # a clock behind the record does not raise it


def test_strength_uses_the_last_retrieval_and_its_count(memory) -> None:
    (episode,) = memory.add("the lighthouse keeper waved", user_id="ana")
    later = episode.recorded_at + timedelta(days=45)
    (fresh,) = memory.strength([episode.id], user_id="ana", now=later).values()
    assert fresh == pytest.approx(math.exp(-45 / BASE_STABILITY_DAYS), rel=1e-6)
    memory.search("lighthouse", user_id="ana")
    (used,) = memory.usage([episode.id], user_id="ana").values()
    later = used.last_retrieved_at + timedelta(days=45)
    (value,) = memory.strength([episode.id], user_id="ana", now=later).values()
    expected = math.exp(-45 / (BASE_STABILITY_DAYS * STABILITY_GROWTH))
    assert value == pytest.approx(expected, rel=1e-6)


def test_salience_comes_from_metadata(memory) -> None:
    (plain, vivid) = memory.add(
        [{"content": "a plain day"}, {"content": "the flood", "metadata": {"salience": 1}}],
        user_id="ana",
    )
    now = vivid.recorded_at + timedelta(days=60)
    values = memory.strength([plain.id, vivid.id], user_id="ana", now=now)
    assert values[plain.id] == pytest.approx(math.exp(-2))
    assert values[vivid.id] == pytest.approx(2 * math.exp(-60 / (5 * BASE_STABILITY_DAYS)))


def test_decay_archives_only_the_weak_and_never_deletes(memory) -> None:
    old, used = memory.add(["an old note", "a note I look up"], user_id="ana")
    memory.search("look up", user_id="ana", limit=1)
    now = datetime.now(UTC) + timedelta(days=120)  # 4 base stabilities: 0.018 unused
    assert memory.decay(user_id="ana", now=now, dry_run=True) == [old.id]
    assert memory.get_all(user_id="ana").total == 2
    assert memory.decay(user_id="ana", now=now) == [old.id]
    assert [e.id for e in memory.get_all(user_id="ana").items] == [used.id]
    assert memory.restore([old.id], user_id="ana") == [old.id]
    strict = DecayPolicy(archive_below=0.5)
    assert sorted(memory.decay(user_id="ana", now=now, policy=strict)) == sorted([old.id, used.id])


def test_decay_needs_a_user_and_a_sound_policy(memory) -> None:
    with pytest.raises(InvalidInputError):
        DecayPolicy(base_stability_days=0)
    with pytest.raises(InvalidInputError):
        memory.decay(user_id="ana", policy="fast")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="user_id"):
        memory.decay()


def test_cli_decay(tmp_path) -> None:
    import json

    from click.testing import CliRunner

    from anamnesis.cli import main

    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        (episode,) = memory.add("an old note", user_id="ana")
    later = (datetime.now(UTC) + timedelta(days=200)).isoformat()
    base = ["--path", str(path), "--embedder", "edge", "decay", "--user", "ana", "--now", later]
    dry = CliRunner().invoke(main, [*base, "--dry-run"])
    assert json.loads(dry.output) == {"dry_run": True, "archived": [episode.id]}
    done = CliRunner().invoke(main, base)
    assert json.loads(done.output) == {"dry_run": False, "archived": [episode.id]}


def test_the_strength_prior_stage_favours_the_strong_and_is_off_by_default(tmp_path) -> None:
    from dataclasses import replace

    from anamnesis.bench.presets import BENCH_PRESETS
    from anamnesis.config import PRESETS

    assert all("strength_prior" not in c.stages for c in PRESETS.values())
    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        old, used = memory.add(
            ["the red boat sails at noon", "the red boat sails at dawn"], user_id="ana"
        )
        for _ in range(3):
            memory.search("dawn", user_id="ana", limit=1)
    later = datetime.now(UTC) + timedelta(days=90)
    hybrid = BENCH_PRESETS["hybrid"]
    scores = {}
    for weight in (1.0, 0.0):  # the prior first: each search counts its own hits after
        config = replace(
            hybrid,
            stages=(*hybrid.stages, "strength_prior"),
            stage_options={**hybrid.stage_options, "strength_prior": {"weight": weight}},
        )
        with Memory(path=path, embedder=EDGE, warm=False, config=config) as memory:
            if weight:
                strengths = memory.strength([old.id, used.id], user_id="ana", now=later)
            hits = memory.search("red boat sails", user_id="ana", now=later)
            scores[weight] = {h.episode.id: h.score for h in hits}
    assert strengths[used.id] > 10 * strengths[old.id]
    for episode_id, base in scores[0.0].items():
        assert scores[1.0][episode_id] == pytest.approx(base * strengths[episode_id], rel=1e-3)
    assert next(iter(scores[1.0])) == used.id
