"""One current value per single-valued slot, whatever the statements and their batching.

A single-valued slot (where you work, where you live) holds one current value: the
one stated for the latest time. That holds within one consolidation batch as across
batches, and whatever order the statements arrive in; every value stated stays in
the slot's history.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anamnesis import Memory
from anamnesis.embed import get_embedder

EXAMPLES = int(os.environ.get("ANAMNESIS_HYPOTHESIS_EXAMPLES", "25"))
EDGE = get_embedder("edge")
T0 = datetime(2024, 1, 1, 10, tzinfo=UTC)
SLOTS = {"works_at": "I work at {}", "lives_in": "I live in {}"}
VALUES = ("Acme", "Globex", "Initech", "Porto", "Lisbon")


def _current(memory: Memory, predicate: str) -> list[str]:
    return [f.object for f in memory.facts(user_id="u", predicate=predicate)]


def test_two_values_for_one_start_in_one_batch_leave_the_later_one(tmp_path: Path) -> None:
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        for month in range(1, 7):
            memory.add(
                ["I work at Acme since last month", "I work at Globex since last month"],
                user_id="u",
                event_time=T0.replace(month=month),
            )
            memory.consolidate(user_id="u")
            assert _current(memory, "works_at") == ["Globex"]
        assert {f.object for f in memory.facts(user_id="u", include_superseded=True)} == {
            "Acme",
            "Globex",
        }


statements = st.lists(
    st.tuples(st.integers(0, 400), st.sampled_from(VALUES)),
    min_size=1,
    max_size=8,
    unique_by=lambda s: s[0],  # one statement per day: "the latest" is well defined
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    predicate=st.sampled_from(sorted(SLOTS)),
    said=statements,
    order=st.randoms(use_true_random=False),
    cuts=st.sets(st.integers(1, 7)),
)
def test_any_statements_leave_exactly_the_latest_value_current(
    predicate: str, said: list[tuple[int, str]], order, cuts: set[int]
) -> None:
    arrival = list(said)
    order.shuffle(arrival)
    bounds = [0, *sorted(c for c in cuts if c < len(arrival)), len(arrival)]
    batches = [arrival[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    with tempfile.TemporaryDirectory() as directory:
        with Memory(path=Path(directory) / "m.db", embedder=EDGE, warm=False) as memory:
            for batch in batches:
                for day, value in batch:
                    memory.add(
                        SLOTS[predicate].format(value),
                        user_id="u",
                        event_time=T0 + timedelta(days=day),
                    )
                memory.consolidate(user_id="u")
            latest = max(said)[1]
            assert _current(memory, predicate) == [latest]
            history = {f.object for f in memory.fact_history(predicate=predicate, user_id="u")}
            assert history == {value for _, value in said}
