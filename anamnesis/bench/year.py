"""A simulated year of use: what decay and the archive do to recall.

For each case (a LoCoMo conversation, or a LongMemEval haystack) one memory is built
(``edge`` embedder, ``hybrid`` preset). Then a year is replayed: "use" questions are
asked on random days and each search's hits are counted as retrievals on that day
(the Memory's own tally is set aside so the simulated clock, not the wall clock, dates
them). At the end of the year three conditions are scored on held-out questions,
which were never replayed, and on the replayed ones:

- **off**: no decay (the default): every episode is hot;
- **prior**: no decay, but search adds the ``strength_prior`` stage (strength as a
  mild prior on the fused scores);
- **decay**: ``Memory.decay`` at the end of the year archives every episode below the
  threshold, and search runs on what is left;
- **decay + archive search**: the same, searched with ``include_archive=True``.

LoCoMo cases replay half of their own questions (shuffled) and hold out the rest.
A LongMemEval case has one question: the replayed "use" is questions of other cases
(traffic that retrieves something, not the case's own topics), and its own question is
held out. Recall is turn-level recall_any@k: any evidence turn among the top k.
"""

from __future__ import annotations

import json
import random
import shlex
import sys
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from ..memory import Memory
from ..usage import UsageDelta
from . import datasets
from .lifecycle import _NoTally
from .presets import BENCH_PRESETS

DAYS = 365
K = 10


@dataclass(slots=True)
class _Tally:
    hits: int = 0
    asked: int = 0

    def rate(self) -> float:
        return self.hits / self.asked if self.asked else float("nan")


def _hit(
    memory: Memory,
    user: str,
    question: datasets.Question,
    key: str,
    archive: bool,
    now: datetime,
) -> bool:
    hits = memory.search(question.text, user_id=user, limit=K, include_archive=archive, now=now)
    found = {str(h.episode.metadata.get(key, h.episode.id)) for h in hits}
    return bool(found & set(question.evidence))


def _prior_memory(path: Path) -> Memory:
    """A second Memory on the same store whose search adds the ``strength_prior``
    stage (its own usage tally set aside too)."""
    config = BENCH_PRESETS["hybrid"]
    config = replace(config, stages=(*config.stages, "strength_prior"))
    memory = Memory(path=path, embedder="edge", config=config, warm=False)
    memory._usage = _NoTally()  # type: ignore[assignment]
    return memory


def run_year(name: str, data: Path, limit: int | None, uses: int, seed: int) -> dict[str, Any]:
    """Replay a year on each case of ``data``; recall under the three conditions."""
    dataset = datasets.load(name, data, limit=limit)
    rng = random.Random(seed)
    everyone = [q for case in dataset.cases for q in case.questions if q.evidence]
    scores = {
        (condition, group): _Tally()
        for condition in ("off", "prior", "decay", "decay+archive")
        for group in ("held-out", "replayed")
    }
    archived = total = 0
    for case in dataset.cases:
        asked = [q for q in case.questions if q.evidence and not q.abstention]
        if not asked:
            continue
        rng.shuffle(asked)
        if name == "locomo":
            replayed, held = asked[: len(asked) // 2], asked[len(asked) // 2 :]
            traffic = [rng.choice(replayed) for _ in range(uses)] if replayed else []
        else:
            replayed, held = [], asked
            traffic = [rng.choice(everyone) for _ in range(uses)]
        with tempfile.TemporaryDirectory() as directory:
            memory = Memory(
                path=Path(directory) / "m.db",
                embedder="edge",
                config=BENCH_PRESETS["hybrid"],
                warm=False,
            )
            with memory:
                memory._usage = _NoTally()  # type: ignore[assignment]
                episodes = memory.add_many(case.messages, user_id=case.id)
                start = max(e.recorded_at for e in episodes)
                for day in sorted(rng.uniform(0, DAYS) for _ in traffic):
                    question = traffic.pop()
                    hits = memory.search(question.text, user_id=case.id, limit=K)
                    at = start + timedelta(days=day)
                    memory.store.record_usage(
                        [UsageDelta(h.episode.id, case.id, 1, at) for h in hits]
                    )
                end = start + timedelta(days=DAYS)
                groups = {"held-out": held, "replayed": replayed}
                with _prior_memory(Path(directory) / "m.db") as prior:
                    for group, questions in groups.items():
                        for condition, searcher in (("off", memory), ("prior", prior)):
                            for q in questions:
                                scores[condition, group].asked += 1
                                scores[condition, group].hits += _hit(
                                    searcher, case.id, q, dataset.evidence_key, False, end
                                )
                moved = memory.decay(user_id=case.id, now=end)
                archived += len(moved)
                total += len(episodes)
                for group, questions in groups.items():
                    for condition, archive in (("decay", False), ("decay+archive", True)):
                        for q in questions:
                            scores[condition, group].asked += 1
                            scores[condition, group].hits += _hit(
                                memory, case.id, q, dataset.evidence_key, archive, end
                            )
    return {
        "dataset": name,
        "data_sha256": dataset.sha256,
        "cases": len(dataset.cases),
        "uses_per_case": uses,
        "seed": seed,
        "days": DAYS,
        "k": K,
        "episodes": total,
        "archived": archived,
        "recall_any": {
            f"{condition} / {group}": {"recall": t.rate(), "questions": t.asked}
            for (condition, group), t in scores.items()
        },
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def year_markdown(result: dict[str, Any]) -> str:
    """One table row per condition and question group."""
    lines = [
        f"{result['dataset']}: {result['cases']} cases, {result['uses_per_case']} replayed "
        f"searches each over {result['days']} days; decay archived {result['archived']:,} "
        f"of {result['episodes']:,} episodes",
        "",
        f"| condition / questions | recall_any@{result['k']} | questions |",
        "|---|---|---|",
    ]
    for label, value in result["recall_any"].items():
        if value["questions"]:
            lines.append(f"| {label} | {value['recall']:.3f} | {value['questions']} |")
    return "\n".join(lines)


@click.command(name="year")
@click.argument("dataset", type=click.Choice(["locomo", "longmemeval"]))
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Cases to run.")
@click.option("--uses", type=click.IntRange(min=0), default=100, show_default=True)
@click.option("--seed", default=1, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def year_command(
    dataset: str, data: Path, limit: int | None, uses: int, seed: int, out: Path | None
) -> None:
    """A simulated year of use: recall with decay and the archive, against without."""
    from ..cli_errors import handled

    with handled():
        result = run_year(dataset, data, limit, uses, seed)
    result["command"] = "anamnesis " + shlex.join(sys.argv[1:])
    if out is not None:
        out.write_text(json.dumps(result, indent=2))
    click.echo(year_markdown(result))
